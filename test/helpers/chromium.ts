// Headless Chromium for the browser tests (Debian's, driven by playwright-core, which downloads
// no browser of its own). Tests skip, with a message, where it is not installed.
import { existsSync } from 'node:fs';
import type { Page } from 'playwright-core';

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
export const haveChromium = existsSync(CHROMIUM);

/** Prints why `what` is skipped, where Chromium is missing. */
export function warnIfNoChromium(what: string): void {
  if (!haveChromium) console.warn(`${what} skipped: no Chromium at ${CHROMIUM} (apt-get install chromium)`);
}

/** Runs `fn` on a fresh tab that records the page's uncaught errors in `errors`; the browser closes however `fn` ends. */
export async function withTab<T>(fn: (tab: Page, errors: string[]) => Promise<T>): Promise<T> {
  const { chromium } = await import('playwright-core');
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  try {
    const tab = await (await browser.newContext()).newPage(); // a context of its own: tab.context().newPage() opens more
    const errors: string[] = [];
    tab.on('pageerror', (e) => errors.push(String(e)));
    return await fn(tab, errors);
  } finally {
    await browser.close();
  }
}
