// What every browser script here shares (e2e.mjs, sealed.mjs): the base
// URL and artifacts directory from the environment, the system Chromium,
// screenshots, and the watch that fails a run on a page error, a CSP
// violation or a dialog.

import { chromium } from "playwright-core";
import fs from "node:fs";
import path from "node:path";

export const BASE = (process.env.BASE_URL || "").replace(/\/$/, "");
export const ARTIFACTS = process.env.ARTIFACTS || "target/test-artifacts/browser";
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";

if (!BASE) fail("BASE_URL is not set");
fs.mkdirSync(ARTIFACTS, { recursive: true });

export function fail(message) {
  console.error(`e2e: ${message}`);
  process.exit(1);
}

export async function screenshot(page, name) {
  await page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`), fullPage: true });
}

/** Uncaught errors and CSP violations on a page fail the run. */
export function watch(page, problems) {
  page.on("pageerror", (error) => problems.push(`page error: ${error.message}`));
  page.on("console", (message) => {
    if (/Content Security Policy|Refused to/.test(message.text())) problems.push(`CSP: ${message.text()}`);
  });
  page.on("dialog", async (dialog) => {
    problems.push(`a dialog opened: ${dialog.message()}`);
    await dialog.dismiss();
  });
}

export async function launch(extraArgs = []) {
  // Playwright gives the browser a fresh temporary profile (--user-data-dir).
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      ...extraArgs,
    ],
  });
}

/** Runs `phases[name]` with a launched browser; prints `RESULT {json}`, or the failure and exits 1. */
export async function runPhase(phases, name, args, launchArgs = []) {
  const phase = phases[name];
  if (!phase) fail(`unknown phase ${name}; use ${Object.keys(phases).join(", ")}`);
  const browser = await launch(launchArgs);
  try {
    const result = await phase(browser, ...args);
    console.log(`RESULT ${JSON.stringify(result)}`);
  } catch (error) {
    console.error(error && error.stack ? error.stack : error);
    process.exitCode = 1;
  } finally {
    await browser.close();
  }
}
