// A private instance's new-paste page (`--require-create-token`) in the
// system Chromium, driven by playwright-core. Run by
// tests/tests/it/browser.rs, which starts the deployment with a tokens file
// and checks the server side:
//
//   node private.mjs save TOKEN    the form asks for a token, saves with it;
//                                  a second save needs no typing; a wrong one is refused and forgotten
//
// Prints one line `RESULT {json}` and exits 0, or what went wrong and exits 1.
// Screenshots go to $ARTIFACTS (private-*.png).

import assert from "node:assert/strict";

import { BASE, runPhase, screenshot, watch } from "./common.mjs";

const [phase, ...args] = process.argv.slice(2);

/** Saves `text` from the form as it stands; returns the new paste's id. */
async function save(page, text) {
  await page.fill("#content", text);
  await page.click("#save");
  await page.locator("#created").waitFor({ state: "visible" });
  return page.locator("#created").getAttribute("data-paste-id");
}

async function saveWithToken(browser, token) {
  const context = await browser.newContext({ viewport: { width: 1100, height: 900 } });
  const page = await context.newPage();
  const problems = [];
  watch(page, problems);
  const sent = [];
  page.on("request", (request) => {
    if (request.method() === "POST") sent.push({ url: request.url(), authorization: request.headers()["authorization"] || null });
  });

  await page.goto(`${BASE}/`);
  await page.locator("#create-token-box", { hasText: "This pastebin is private" }).waitFor();
  assert.equal(await page.inputValue("#create-token"), "", "nothing kept yet");
  await screenshot(page, "private-01-asks-for-a-token");

  // Without a token the form does not submit: the field is required.
  await page.fill("#content", "no token");
  await page.click("#save");
  assert.equal(sent.length, 0, "nothing sent without a token");

  // Entered once.
  await page.fill("#create-token", token);
  const first = await save(page, "the first private paste");
  await screenshot(page, "private-02-saved");

  // A new visit: the token is already there, kept for this site.
  await page.goto(`${BASE}/`);
  assert.equal(await page.inputValue("#create-token"), token, "kept in this browser");
  const second = await save(page, "the second private paste, token not typed again");
  assert.equal(await page.evaluate(() => localStorage.getItem("pastebin.create-token")), token);

  for (const request of sent) {
    assert.equal(request.authorization, `Bearer ${token}`, `${request.url} carries the token in its header`);
    assert.ok(!request.url.includes(token), `${request.url} carries no token`);
  }
  for (const link of [page.url(), await page.inputValue("#share-url"), await page.inputValue("#raw-url")]) {
    assert.ok(!link.includes(token), `${link} carries no token`);
  }

  // A wrong token: refused, said, and no longer kept.
  await page.goto(`${BASE}/`);
  await page.fill("#create-token", "not-a-token");
  await page.fill("#content", "refused");
  await page.click("#save");
  await page.locator("#status", { hasText: "Check the create token" }).waitFor();
  assert.equal(await page.evaluate(() => localStorage.getItem("pastebin.create-token")), null, "a refused token is forgotten");
  await screenshot(page, "private-03-wrong-token");

  assert.deepEqual(problems, []);
  await context.close();
  return { first, second, posts: sent.length };
}

await runPhase({ save: saveWithToken }, phase, args);
