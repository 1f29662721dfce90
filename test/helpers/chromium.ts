// Headless browsers for the browser tests, Debian's, driven by playwright-core (which downloads
// no browser of its own): Chromium over CDP, and Firefox ESR over WebDriver BiDi (playwright's
// 'moz-firefox' channel, for a stock Firefox). Tests skip, with a message, where one is missing.
import { existsSync } from 'node:fs';
import type { Page } from 'playwright-core';

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
export const haveChromium = existsSync(CHROMIUM);
export const FIREFOX = process.env.FIREFOX_PATH ?? '/usr/bin/firefox-esr';
export const haveFirefox = existsSync(FIREFOX);

/**
 * The WebDriver BiDi command this playwright-core sends at launch that the Firefox at FIREFOX
 * does not know (an ESR older than the driver expects), or undefined when it launches (or is
 * missing: haveFirefox says so). Any other launch failure throws.
 */
export async function firefoxLacks(): Promise<string | undefined> {
  if (!haveFirefox) return undefined;
  const { firefox } = await import('playwright-core');
  try {
    await (await firefox.launch({ channel: 'moz-firefox', executablePath: FIREFOX, headless: true })).close();
    return undefined;
  } catch (e) {
    const m = /Protocol error \(([^)]+)\): unknown command/.exec(String((e as Error).message));
    if (!m) throw e;
    return m[1];
  }
}

/** Prints why `what` is skipped, where Chromium is missing. */
export function warnIfNoChromium(what: string): void {
  if (!haveChromium) console.warn(`${what} skipped: no Chromium at ${CHROMIUM} (apt-get install chromium)`);
}

/**
 * Runs `fn` on a fresh tab that records the page's uncaught errors in `errors`; the browser
 * (Chromium, or Firefox ESR) closes however `fn` ends.
 */
export async function withTab<T>(
  fn: (tab: Page, errors: string[]) => Promise<T>,
  which: 'chromium' | 'firefox' = 'chromium',
): Promise<T> {
  const { chromium, firefox } = await import('playwright-core');
  const browser =
    which === 'firefox'
      ? await firefox.launch({ channel: 'moz-firefox', executablePath: FIREFOX, headless: true })
      : await chromium.launch({
          executablePath: CHROMIUM,
          args: [
            '--no-sandbox',
            '--disable-gpu',
            '--disable-quic',
            '--no-first-run',
            '--disable-background-networking',
            '--disable-component-update',
            '--disable-sync',
          ],
        });
  try {
    // a context of its own: tab.context().newPage() opens more
    const tab = await (await browser.newContext()).newPage();
    const errors: string[] = [];
    tab.on('pageerror', (e) => errors.push(String(e)));
    return await fn(tab, errors);
  } finally {
    await browser.close();
  }
}
