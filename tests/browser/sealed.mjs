// Sealed pastes in the system Chromium (docs/reader-features.md#sealed-pastes),
// driven by playwright-core. Run by tests/tests/it/sealed.rs, which starts a
// real deployment and checks the server side between the phases:
//
//   node sealed.mjs create               a sealed paste whose first 201 is lost
//   node sealed.mjs read LINK            open LINK; then without, and with a wrong key
//   node sealed.mjs edit                 an edit after a failure seals anew
//   node sealed.mjs password PASSWORD    a paste that needs PASSWORD, opened
//   node sealed.mjs burn                 a sealed burn paste asks before it fetches
//   node sealed.mjs insecure ID          plain HTTP on another host name: says why not
//
// Each phase prints one line `RESULT {json}` and exits 0, or prints what went
// wrong and exits 1. Screenshots go to $ARTIFACTS (sealed-*.png).

import assert from "node:assert/strict";
import fs from "node:fs";

import path from "node:path";

import { ARTIFACTS, BASE, fail, runPhase, screenshot, watch } from "./common.mjs";

const SEALED_TYPE = "application/vnd.pastebin.sealed+json";
const RETRYING = "retrying the same save: it will not make a second paste";
// The host name the `insecure` phase maps to this machine: not localhost,
// so plain HTTP on it is not a secure context.
const PLAIN_HOST = "sealed.test";

const [phase, ...args] = process.argv.slice(2);

async function newPage(browser, options = {}) {
  const context = await browser.newContext({ viewport: { width: 1100, height: 800 }, acceptDownloads: true, ...options });
  const page = await context.newPage();
  const problems = [];
  watch(page, problems);
  return { context, page, problems };
}

/** Every create POST the page sends, with its key and exact bytes. */
function recordCreates(page, handle) {
  const posts = [];
  return page
    .route((url) => url.pathname === "/api/v1/pastes", async (route) => {
      const request = route.request();
      if (request.method() !== "POST") return route.continue();
      const post = {
        key: request.headers()["idempotency-key"],
        type: request.headers()["content-type"],
        body: (request.postDataBuffer() || Buffer.alloc(0)).toString("base64"),
      };
      posts.push(post);
      return handle(route, posts.length, post);
    })
    .then(() => posts);
}

/** Fills the new-paste form for a sealed save and presses the button. */
async function sealAndSave(page, text, { password = "", burn = false } = {}) {
  await page.goto(`${BASE}/`);
  assert.equal(await page.isEnabled("#encrypt"), true, "encryption is offered on a secure origin");
  assert.equal(await page.isVisible("#seal-unavailable"), false);
  await page.fill("#content", text);
  await page.check("#encrypt");
  await page.locator("#seal-password").waitFor({ state: "visible" });
  // Switched off, the button is a plain save's again; back on, a sealed one's.
  await page.uncheck("#encrypt");
  assert.equal((await page.textContent("#save")).trim(), "Save paste");
  await page.check("#encrypt");
  if (password) await page.fill("#seal-password", password);
  if (burn) await page.check("#burn");
  await page.selectOption("#expiry", "86400");
  assert.equal((await page.textContent("#save")).trim(), "Encrypt and save");
  await page.click("#save");
}

async function created(page) {
  await page.locator("#created").waitFor({ state: "visible" });
  const link = await page.inputValue("#share-url");
  const match = /^(.*)\/([0-9A-Za-z]+)#([A-Za-z0-9_-]{43})$/.exec(link);
  assert.ok(match, `the share link carries a 43-character key after '#': ${link}`);
  return { link, id: match[2], fragment: match[3], token: await page.inputValue("#delete-token") };
}

/** Nothing of the save is kept in the browser's storage. */
async function assertNothingStored(page, secrets) {
  const stored = await page.evaluate(() => JSON.stringify({ local: { ...localStorage }, session: { ...sessionStorage } }));
  for (const secret of secrets) assert.ok(!stored.includes(secret), `storage holds no secret: ${stored}`);
  assert.equal(await page.evaluate(() => localStorage.length + sessionStorage.length), 0, stored);
}

/**
 * A sealed save whose first POST reaches the server and is processed, but
 * whose 201 never reaches the page. The page retries the identical request
 * by itself, saying so; the retry is held until the test has read that.
 */
async function create(browser) {
  const { context, page, problems } = await newPage(browser);
  let lost = null;
  let replayed = null;
  let release;
  const seen = new Promise((resolve) => { release = resolve; });
  const posts = await recordCreates(page, async (route, count) => {
    const response = await route.fetch();
    if (count === 1) {
      lost = { status: response.status(), body: await response.json() };
      return route.abort("connectionreset");
    }
    await seen;
    replayed = { status: response.status(), replayed: response.headers()["idempotent-replayed"] };
    return route.fulfill({ response });
  });
  const marker = `sealed-plaintext-${Date.now()}-${Math.random().toString(36).slice(2)}`;
  const text = `${marker}\nsecond line — ünïcödé <b>not markup</b>\n\tthird line\n`;
  await sealAndSave(page, text);
  await page.locator("#status", { hasText: RETRYING }).waitFor();
  await screenshot(page, "sealed-01-retrying");
  release();
  const saved = await created(page);
  await screenshot(page, "sealed-02-created");

  assert.equal(lost.status, 201, "the server processed the first POST");
  assert.equal(posts.length, 2, `one retry: ${JSON.stringify(posts.map((p) => p.key))}`);
  assert.equal(posts[0].key, posts[1].key, "the retry reused the Idempotency-Key");
  assert.equal(posts[0].body, posts[1].body, "the retry sent the same bytes");
  assert.equal(posts[0].type, SEALED_TYPE);
  assert.deepEqual(replayed, { status: 201, replayed: "true" }, "the retry was answered from the stored 201");
  assert.equal(saved.id, lost.body.id, "the page shows the paste the lost answer named");
  assert.equal(saved.link, `${lost.body.url}#${saved.fragment}`);
  const envelope = Buffer.from(posts[0].body, "base64").toString("utf8");
  assert.ok(!envelope.includes(marker) && !envelope.includes(saved.fragment), "the envelope holds neither text nor key");
  const wire = JSON.parse(envelope);
  assert.equal(wire.version, 1);
  assert.equal(wire.algorithm, "AES-256-GCM");
  assert.equal(await page.isVisible("#raw-url"), false, "no raw link: it serves the envelope, not the text");
  assert.equal(new URL(page.url()).hash, `#${saved.fragment}`, "the address bar holds the whole link");
  await assertNothingStored(page, [marker, saved.fragment]);
  assert.deepEqual(problems, []);
  await context.close();
  return { ...saved, text, marker, envelope: posts[0].body, key: posts[0].key };
}

/** The text a sealed paste's page shows once opened. */
async function openedLines(page) {
  await page.locator("#sealed-opened").waitFor({ state: "visible" });
  return page.locator("#sealed-lines > li").allTextContents();
}

/** A page that opens nothing: it says `expected` and shows no line, link or button. */
async function assertShowsNothing(page, expected) {
  await page.locator("#sealed-status", { hasText: expected }).waitFor();
  assert.equal(await page.isVisible("#sealed-opened"), false);
  assert.equal(await page.locator("#sealed-lines > li").count(), 0);
  assert.equal(await page.isVisible("#sealed-password"), false);
}

/** The link in a fresh browser: the text, copied, downloaded; then without and with a wrong key. */
async function read(browser, link) {
  const { context, page, problems } = await newPage(browser, { deviceScaleFactor: 2 });
  await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: BASE });
  await page.goto(link);
  const lines = await openedLines(page);
  await page.locator("#sealed-status", { hasText: "Decrypted in this browser" }).waitFor();
  assert.equal(await page.inputValue("#page-url"), link, "the link to copy carries the key");
  await page.click("#copy-content");
  await page.locator("#copy-content", { hasText: "Copied" }).waitFor();
  const copied = await page.evaluate(() => navigator.clipboard.readText());
  await page.click("button[data-copy=page-url]");
  const copiedLink = await page.evaluate(() => navigator.clipboard.readText());
  const [download] = await Promise.all([page.waitForEvent("download"), page.click("#sealed-download")]);
  const downloaded = fs.readFileSync(await download.path(), "utf8");
  await page.click("#sealed-qr-box summary");
  const qrImage = path.resolve(ARTIFACTS, "sealed-qr.png");
  await page.locator("#sealed-qr svg").screenshot({ path: qrImage });
  await screenshot(page, "sealed-03-opened");
  assert.deepEqual(problems, []);
  await context.close();

  const id = new URL(link).pathname.slice(1);
  const bare = await newPage(browser);
  const fetched = [];
  bare.page.on("request", (request) => fetched.push(new URL(request.url()).pathname));
  await bare.page.goto(`${BASE}/${id}`);
  await assertShowsNothing(bare.page, "the part after “#” is missing");
  assert.ok(!fetched.includes(`/raw/${id}`), `without a key the envelope is not even fetched: ${fetched}`);
  await screenshot(bare.page, "sealed-04-no-key");
  assert.deepEqual(bare.problems, []);
  await bare.context.close();

  const wrong = await newPage(browser);
  await wrong.page.goto(`${BASE}/${id}#${"A".repeat(42)}E`);
  await assertShowsNothing(wrong.page, "does not open this paste");
  await screenshot(wrong.page, "sealed-05-wrong-key");
  await wrong.page.goto(`${BASE}/${id}#not-a-key`);
  await wrong.page.reload();
  await assertShowsNothing(wrong.page, "is damaged");
  assert.deepEqual(wrong.problems, []);
  await wrong.context.close();
  return { lines, copied, copiedLink, downloaded, qrImage };
}

/**
 * A save whose sends all fail: the page resends the same bytes under the
 * same key; then the text is edited, and the next save is a new one.
 */
async function edit(browser) {
  const { context, page, problems } = await newPage(browser);
  let offline = true;
  const posts = await recordCreates(page, (route) => (offline ? route.abort("internetdisconnected") : route.continue()));
  await sealAndSave(page, "the first draft, never saved");
  await page.locator("#status", { hasText: RETRYING }).waitFor();
  while (posts.length < 2) await page.waitForTimeout(100);
  await page.fill("#content", "the edited text, saved");
  await page.locator("#status", { hasText: "changed" }).waitFor();
  await screenshot(page, "sealed-06-edited-after-failure");
  const failed = posts.length;
  offline = false;
  await page.click("#save");
  const saved = await created(page);
  const first = posts.slice(0, failed);
  assert.ok(first.every((p) => p.key === first[0].key && p.body === first[0].body), "every resend was identical");
  const last = posts[posts.length - 1];
  assert.equal(posts.length, failed + 1);
  assert.notEqual(last.key, first[0].key, "a new Idempotency-Key");
  const iv = (post) => JSON.parse(Buffer.from(post.body, "base64").toString("utf8")).iv;
  assert.notEqual(iv(last), iv(first[0]), "a new IV");
  assert.deepEqual(problems, []);
  await context.close();
  return { ...saved, attempts: failed };
}

/** A paste sealed with a password: the link alone opens nothing. */
async function password(browser, secret) {
  const maker = await newPage(browser);
  await sealAndSave(maker.page, "behind a password\n", { password: secret });
  const saved = await created(maker.page);
  await assertNothingStored(maker.page, [saved.fragment, secret]);
  await maker.context.close();

  const { context, page, problems } = await newPage(browser);
  await page.goto(saved.link);
  await page.locator("#sealed-password").waitFor({ state: "visible" });
  assert.equal(await page.isVisible("#sealed-opened"), false, "nothing before the password");
  await page.fill("#sealed-password-input", `${secret}-wrong`);
  await page.click("#sealed-password button[type=submit]");
  await page.locator("#sealed-status", { hasText: "password or the link's key is wrong" }).waitFor();
  assert.equal(await page.isVisible("#sealed-opened"), false);
  await screenshot(page, "sealed-07-wrong-password");
  await page.fill("#sealed-password-input", secret);
  await page.click("#sealed-password button[type=submit]");
  const lines = await openedLines(page);
  await screenshot(page, "sealed-08-password-opened");
  assert.deepEqual(problems, []);
  await context.close();
  return { ...saved, lines };
}

/** A sealed burn paste: the page asks first; only the click fetches (and burns) it. */
async function burn(browser) {
  const maker = await newPage(browser);
  await sealAndSave(maker.page, "read me once\n", { burn: true });
  const saved = await created(maker.page);
  await maker.context.close();

  const { context, page, problems } = await newPage(browser);
  const fetched = [];
  page.on("request", (request) => fetched.push(new URL(request.url()).pathname));
  await page.goto(saved.link);
  await page.locator("#sealed-burn", { hasText: "deleted when you open it" }).waitFor();
  assert.ok(!fetched.includes(`/raw/${saved.id}`), "nothing fetched before the click");
  const before = await context.request.head(`${BASE}/api/v1/pastes/${saved.id}`);
  assert.equal(before.status(), 200, "still there before the click");
  await screenshot(page, "sealed-09-burn-asks");
  await page.click("#sealed-reveal");
  const lines = await openedLines(page);
  await page.locator("#sealed-status", { hasText: "burned after reading" }).waitFor();
  const after = await context.request.head(`${BASE}/api/v1/pastes/${saved.id}`);
  assert.equal(after.status(), 404, "the one read burned it");
  await screenshot(page, "sealed-10-burned");
  assert.deepEqual(problems, []);
  await context.close();
  return { ...saved, lines };
}

/** Plain HTTP on a host name other than localhost: no Web Crypto, and the pages say why. */
async function insecure(browser, id) {
  const base = BASE.replace(/\/\/[^:/]+/, `//${PLAIN_HOST}`);
  const { context, page, problems } = await newPage(browser);
  await page.goto(`${base}/`);
  assert.equal(await page.evaluate(() => window.isSecureContext), false, "the mapped host is not a secure context");
  await page.locator("#seal-unavailable", { hasText: "plain HTTP" }).waitFor();
  assert.equal(await page.isEnabled("#encrypt"), false);
  await screenshot(page, "sealed-11-plain-http-new");
  await page.goto(`${base}/${id}#${"A".repeat(43)}`);
  await assertShowsNothing(page, "plain HTTP");
  await screenshot(page, "sealed-12-plain-http-paste");
  assert.deepEqual(problems, []);
  await context.close();
  return { id };
}

const phases = { create, read, edit, password, burn, insecure };
if (!phases[phase]) fail(`unknown phase ${phase}; use ${Object.keys(phases).join(", ")}`);
const port = new URL(BASE).port;
await runPhase(phases, phase, args, phase === "insecure" ? [`--host-resolver-rules=MAP ${PLAIN_HOST}:${port} 127.0.0.1:${port}`] : []);
