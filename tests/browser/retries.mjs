// The new-paste page's retries in the system Chromium, driven by
// playwright-core. Run by tests/tests/it/browser.rs:
//
//   node retries.mjs answers     a plain and a sealed save, each answered
//                                408, 429 and 502 before its 201
//
// A 408, a 429 and every 5xx are answers to retry with the same key after
// their Retry-After (docs/api.md#retries), as the CLI does; the first here
// is the server's own 201, lost and replaced by a 408, so a resend under a
// new key would make a second paste. Prints one line `RESULT {json}` and
// exits 0, or prints what went wrong and exits 1.

import assert from "node:assert/strict";

import { BASE, runPhase, screenshot, watch } from "./common.mjs";

/** What the page hears before the real answer, in order. */
const ANSWERED = [408, 429, 502];

function answer(status) {
  return {
    status,
    headers: { "Retry-After": "1", "Content-Type": "application/json" },
    body: JSON.stringify({ error: { code: "retry", message: `answered ${status} by the test` } }),
  };
}

async function save(browser, sealed) {
  const context = await browser.newContext({ viewport: { width: 1100, height: 800 } });
  const page = await context.newPage();
  const problems = [];
  watch(page, problems);
  const posts = [];
  let lost = null;
  await page.route((url) => url.pathname === "/api/v1/pastes", async (route) => {
    const request = route.request();
    if (request.method() !== "POST") return route.continue();
    posts.push({ key: request.headers()["idempotency-key"], at: Date.now() });
    if (posts.length === 1) {
      // The server makes the paste; its 201 is lost, and a 408 arrives instead.
      lost = await (await route.fetch()).json();
      return route.fulfill(answer(ANSWERED[0]));
    }
    if (posts.length <= ANSWERED.length) return route.fulfill(answer(ANSWERED[posts.length - 1]));
    return route.fulfill({ response: await route.fetch() });
  });

  await page.goto(`${BASE}/`);
  const kind = sealed ? "sealed" : "plain";
  await page.fill("#content", `a ${kind} save answered ${ANSWERED.join(", ")}, then 201`);
  if (sealed) await page.check("#encrypt");
  await page.click("#save");
  // No click after the first: the page resends by itself.
  await page.locator("#created").waitFor({ state: "visible", timeout: 60000 });
  await screenshot(page, `retries-${kind}`);

  assert.equal(posts.length, ANSWERED.length + 1, `${kind}: one send per answer, then the one that got 201`);
  for (const post of posts) assert.equal(post.key, posts[0].key, `${kind}: every resend carries the first key`);
  for (let i = 1; i < posts.length; i++) {
    assert.ok(posts[i].at - posts[i - 1].at >= 900, `${kind}: resend ${i} waited for Retry-After`);
  }
  const id = await page.getAttribute("#created", "data-paste-id");
  assert.equal(id, lost.id, `${kind}: the page shows the paste the lost 201 named`);
  assert.deepEqual(problems, []);
  await context.close();
  return { id, key: posts[0].key };
}

await runPhase(
  {
    answers: async (browser) => ({ plain: await save(browser, false), sealed: await save(browser, true) }),
  },
  process.argv[2],
  process.argv.slice(3),
);
