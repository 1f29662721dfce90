#!/usr/bin/env node
import '../dist/node/cli.js';
