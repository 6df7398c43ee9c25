// End-to-end checks of the gateway's pages in the system Chromium, driven by
// playwright-core. Run by tests/tests/it/browser.rs, which starts a real
// deployment and checks the server side between the phases:
//
//   node e2e.mjs create                 BASE_URL, ARTIFACTS
//   node e2e.mjs view-delete ID TOKEN   BASE_URL, ARTIFACTS
//   node e2e.mjs reader                 BASE_URL, ARTIFACTS
//   node e2e.mjs share                  BASE_URL, ARTIFACTS
//   node e2e.mjs report ID              BASE_URL, ARTIFACTS
//
// Each phase prints one line `RESULT {json}` for the Rust test and exits 0,
// or prints what went wrong and exits 1. Screenshots go to $ARTIFACTS.

import assert from "node:assert/strict";
import path from "node:path";

import { ARTIFACTS, BASE, fail, launch, screenshot, watch } from "./common.mjs";

const [phase, ...args] = process.argv.slice(2);

/**
 * Create a paste whose first POST reaches the server and is processed, but
 * whose answer never reaches the page (the connection is reset after the
 * 201). The page says it is still trying; a reload keeps the save; "Try
 * again" must send the same idempotency key and get the same paste back.
 */
async function createWithLostAnswer(browser) {
  const context = await browser.newContext({ viewport: { width: 1100, height: 800 } });
  await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: BASE });
  const page = await context.newPage();
  const problems = [];
  watch(page, problems);

  const posts = [];
  let lost = null;
  let retried = null;
  await page.route("**/api/v1/pastes", async (route) => {
    const request = route.request();
    if (request.method() !== "POST") return route.continue();
    posts.push(request.headers()["idempotency-key"]);
    const response = await route.fetch();
    if (posts.length === 1) {
      // The server has answered: the paste exists. The page never hears of it.
      lost = { status: response.status(), body: await response.json() };
      return route.abort("connectionreset");
    }
    retried = { status: response.status(), replayed: response.headers()["idempotent-replayed"] };
    return route.fulfill({ response });
  });

  const response = await page.goto(`${BASE}/`);
  assert.equal(response.status(), 200);
  assert.match(response.headers()["content-security-policy"] || "", /script-src 'self'/);
  const text = "hello from the browser\nsecond line, with a long tail: " + "lorem ipsum ".repeat(30);
  await page.fill("#content", text);
  await page.selectOption("#expiry", "86400");
  await screenshot(page, "01-new-paste");

  await page.click("#save");
  await page.locator("#status", { hasText: "Still trying" }).waitFor();
  assert.ok(lost, "the first POST went through the interception");
  assert.equal(lost.status, 201, "the server processed the first POST");
  await screenshot(page, "02-still-trying");

  // A reload keeps the unfinished save: same text, same expiry, "Try again".
  await page.reload();
  assert.equal(await page.inputValue("#content"), text);
  assert.equal(await page.inputValue("#expiry"), "86400");
  assert.equal((await page.textContent("#save")).trim(), "Try again");
  await page.locator("#status", { hasText: "earlier save may not have finished" }).waitFor();
  await screenshot(page, "03-reloaded-try-again");

  await page.click("#save");
  await page.locator("#created").waitFor({ state: "visible" });
  await screenshot(page, "04-created");

  assert.equal(posts.length, 2, "one retry");
  assert.ok(posts[0] && posts[0] === posts[1], `the retry reused the key: ${posts}`);
  assert.equal(retried.status, 201);
  assert.equal(retried.replayed, "true", "the retry was answered from the stored 201");
  const id = await page.getAttribute("#created", "data-paste-id");
  assert.equal(id, lost.body.id, "the page shows the paste the lost answer named");
  assert.equal(await page.inputValue("#share-url"), lost.body.url);
  assert.equal(await page.inputValue("#raw-url"), lost.body.raw_url);
  assert.equal(await page.inputValue("#delete-token"), lost.body.delete_token);
  await page.locator("#created .warning", { hasText: "will not be shown again" }).waitFor();
  await page.click("button[data-copy=share-url]");
  await page.locator("button[data-copy=share-url]", { hasText: "Copied" }).waitFor();
  assert.equal(await page.evaluate(() => sessionStorage.length), 0, "the finished save is forgotten");

  assert.deepEqual(problems, []);
  await context.close();
  return { id, token: lost.body.delete_token, key: posts[0], content: text };
}

/** The view and delete pages with JavaScript off: plain HTML and a form POST. */
async function viewAndDeleteWithoutScript(browser, id, token) {
  const context = await browser.newContext({ javaScriptEnabled: false, viewport: { width: 1100, height: 800 } });
  const page = await context.newPage();
  const problems = [];
  watch(page, problems);

  const view = await page.goto(`${BASE}/${id}`);
  assert.equal(view.status(), 200);
  assert.match(view.headers()["content-type"], /^text\/html; charset=utf-8/);
  assert.match(view.headers()["content-security-policy"] || "", /default-src 'none'/);
  assert.equal(await page.locator("ol.code li").count(), 2, "two numbered lines");
  assert.equal(await page.locator("ol.code li").first().textContent(), "hello from the browser");
  const wraps = await page.$eval("ol.code li:nth-child(2)", (li) => getComputedStyle(li).whiteSpace);
  assert.equal(wraps, "pre-wrap", "long lines wrap");
  const font = await page.$eval("ol.code", (ol) => getComputedStyle(ol).fontFamily);
  assert.match(font, /mono/i);
  assert.equal(await page.getAttribute("a[href^='/raw/']", "href"), `/raw/${id}`);
  assert.equal(await page.isVisible("button[data-copy=page-url]"), false, "no dead copy buttons without the script");
  assert.equal(await page.isVisible("#copy-content"), false);
  await screenshot(page, "05-view");

  await page.click(`a[href='/${id}/delete']`);
  await page.waitForURL(`${BASE}/${id}/delete`);
  await screenshot(page, "06-delete-form");

  await page.fill("#token", "not-the-token");
  const [wrong] = await Promise.all([page.waitForResponse(`${BASE}/${id}/delete`), page.click("button[type=submit]")]);
  assert.equal(wrong.status(), 403);
  await page.locator(".error", { hasText: "does not match" }).waitFor();
  await screenshot(page, "07-delete-wrong-token");

  await page.fill("#token", token);
  const [done] = await Promise.all([page.waitForResponse(`${BASE}/${id}/delete`), page.click("button[type=submit]")]);
  assert.equal(done.status(), 200);
  await page.locator("h1", { hasText: "Deleted" }).waitFor();
  await screenshot(page, "08-deleted");

  const gone = await page.goto(`${BASE}/${id}`);
  assert.equal(gone.status(), 404);
  await page.locator("h1", { hasText: "Not found" }).waitFor();
  await screenshot(page, "09-not-found-after-delete");

  assert.deepEqual(problems, []);
  await context.close();
}

/**
 * A first attempt that never reaches the server, then an edit: the edited
 * text is a new save with a new key. The saved text is markup, and every
 * page must show it as text.
 */
async function scriptPasteIsText(browser) {
  const context = await browser.newContext({ viewport: { width: 1100, height: 800 } });
  const page = await context.newPage();
  const problems = [];
  watch(page, problems);

  const keys = [];
  await page.route("**/api/v1/pastes", async (route) => {
    keys.push(route.request().headers()["idempotency-key"]);
    if (keys.length === 1) return route.abort("internetdisconnected");
    return route.continue();
  });

  await page.goto(`${BASE}/`);
  await page.fill("#content", "a draft");
  await page.click("#save");
  await page.locator("#status", { hasText: "Still trying" }).waitFor();
  assert.equal((await page.textContent("#save")).trim(), "Try again");

  const markup = '<script>window.pwned = true; alert("xss")</script>\n<b id="bold">not bold</b> & <img src=x onerror=alert(1)>';
  await page.fill("#content", markup);
  assert.equal((await page.textContent("#save")).trim(), "Save paste", "edited text is a new save");
  await page.click("#save");
  await page.locator("#created").waitFor({ state: "visible" });
  assert.equal(keys.length, 2);
  assert.notEqual(keys[0], keys[1], "editing after a failure made a new key");
  const id = await page.getAttribute("#created", "data-paste-id");

  await page.click("#view-link");
  await page.waitForURL(`${BASE}/${id}`);
  const lines = await page.locator("ol.code li").allTextContents();
  assert.deepEqual(lines, markup.split("\n"), "the markup is shown as text, line by line");
  assert.equal(await page.locator("ol.code script, ol.code b, ol.code img").count(), 0, "no element came from the paste");
  assert.equal(await page.evaluate(() => window.pwned), undefined, "the paste's script never ran");
  await screenshot(page, "10-script-paste-as-text");

  const raw = await page.goto(`${BASE}/raw/${id}`);
  assert.match(raw.headers()["content-type"], /^text\/plain/);
  assert.equal(await raw.text(), markup);

  assert.deepEqual(problems, []);
  await context.close();
  return { scriptId: id, content: markup };
}

/** POST /api/v1/pastes from node (not the page), with a fresh key. */
async function apiCreate(body) {
  const response = await fetch(`${BASE}/api/v1/pastes`, {
    method: "POST",
    headers: { "Content-Type": "application/json", "Idempotency-Key": crypto.randomUUID() },
    body: JSON.stringify(body),
  });
  assert.equal(response.status, 201);
  return response.json();
}

const RUST_SAMPLE = `// A paste with a language: highlighted on the server.
use std::collections::HashMap;

/// Counts words; "burn after reading" is one of them.
fn count(text: &str) -> HashMap<&str, usize> {
    let mut counts = HashMap::new();
    for word in text.split_whitespace() {
        *counts.entry(word).or_insert(0) += 1;
    }
    counts
}

fn main() {
    let counts = count("one key per save, one paste per key");
    println!("{} distinct words", counts.len());
}
`;

/** The colour of the first keyword and the page background, as the browser computes them. */
async function colours(page) {
  return page.evaluate(() => ({
    keyword: getComputedStyle(document.querySelector("ol.code span.hl-keyword, ol.code span.hl-storage")).color,
    background: getComputedStyle(document.body).backgroundColor,
    theme: document.documentElement.dataset.theme || null,
  }));
}

/** Highlighting, light and dark (system preference and the remembered toggle), screenshots of both. */
async function highlightedAndDark(browser) {
  const created = await apiCreate({ content: RUST_SAMPLE, language: "rust" });
  const light = await browser.newContext({ viewport: { width: 1000, height: 760 }, colorScheme: "light" });
  const page = await light.newPage();
  const problems = [];
  watch(page, problems);
  await page.goto(`${BASE}/${created.id}`);
  assert.ok((await page.locator("ol.code span[class*='hl-']").count()) > 10, "the code is highlighted with classes");
  assert.equal(await page.locator("ol.code [style]").count(), 0, "no inline styles");
  const lightColours = await colours(page);
  assert.equal(lightColours.background, "rgb(255, 255, 255)");
  await page.screenshot({ path: path.join(ARTIFACTS, "paste-light.png") });

  // The toggle: dark now, and still dark after a reload (localStorage).
  await page.click("#theme-toggle");
  assert.equal(await page.getAttribute("html", "data-theme"), "dark");
  await page.reload();
  const toggled = await colours(page);
  assert.equal(toggled.theme, "dark", "the choice is remembered");
  assert.notEqual(toggled.background, lightColours.background);
  assert.notEqual(toggled.keyword, lightColours.keyword, "the dark theme recolours the code");
  assert.equal((await page.textContent("#theme-toggle")).trim(), "Light mode");
  await page.screenshot({ path: path.join(ARTIFACTS, "paste-dark.png") });
  // The toggle works on the new-paste page too (same storage).
  await page.goto(`${BASE}/`);
  assert.equal(await page.getAttribute("html", "data-theme"), "dark");
  await page.click("#theme-toggle");
  assert.equal(await page.getAttribute("html", "data-theme"), "light");
  await light.close();

  // No choice made: the system preference decides.
  const dark = await browser.newContext({ viewport: { width: 1000, height: 760 }, colorScheme: "dark" });
  const darkPage = await dark.newPage();
  watch(darkPage, problems);
  await darkPage.goto(`${BASE}/${created.id}`);
  const system = await colours(darkPage);
  assert.equal(system.theme, null);
  assert.equal(system.background, toggled.background, "prefers-color-scheme: dark gives the dark theme");
  assert.equal(system.keyword, toggled.keyword);
  await dark.close();
  assert.deepEqual(problems, []);
  return created.id;
}

/** A burn paste: the page (twice) shows a notice, never the content; the button reads it once. */
async function burnNotice(browser) {
  const created = await apiCreate({ content: "read me once", burn_after_reading: true });
  const context = await browser.newContext({ viewport: { width: 1000, height: 600 } });
  const page = await context.newPage();
  const problems = [];
  watch(page, problems);
  for (let i = 0; i < 2; i++) {
    const response = await page.goto(`${BASE}/${created.id}`);
    assert.equal(response.status(), 200);
    await page.locator("#burn-notice", { hasText: "will be deleted when you view it" }).waitFor();
    assert.equal(await page.locator("text=read me once").count(), 0, "the page does not show (or burn) it");
  }
  await screenshot(page, "reader-burn-notice");
  const [shown] = await Promise.all([page.waitForResponse(`${BASE}/${created.id}`), page.click("#reveal")]);
  assert.equal(shown.status(), 200);
  await page.locator("ol.code li", { hasText: "read me once" }).waitFor();
  await page.locator(".burned", { hasText: "burned after reading" }).waitFor();
  await screenshot(page, "reader-burned");
  const again = await page.goto(`${BASE}/${created.id}`);
  assert.equal(again.status(), 404, "burned: gone for everyone");
  assert.deepEqual(problems, []);
  await context.close();
  return created.id;
}

/**
 * A file from the picker whose first answer is lost: "Try again" sends the
 * same key and the same bytes, and gets the same paste. Then the created
 * page's QR code, the paste page's download link, and a dropped file.
 */
async function fileUpload(browser) {
  const context = await browser.newContext({ viewport: { width: 1000, height: 900 } });
  const page = await context.newPage();
  const problems = [];
  watch(page, problems);
  const posts = [];
  let lost = null;
  await page.route("**/api/v1/pastes?**", async (route) => {
    posts.push({ key: route.request().headers()["idempotency-key"], type: route.request().headers()["content-type"] });
    const response = await route.fetch();
    if (posts.length === 1) {
      lost = await response.json();
      return route.abort("connectionreset");
    }
    return route.fulfill({ response });
  });
  const bytes = Buffer.from(Array.from({ length: 3000 }, (_, i) => (i * 37) % 256));
  await page.goto(`${BASE}/`);
  await page.setInputFiles("#file", { name: "blob.bin", mimeType: "application/octet-stream", buffer: bytes });
  await page.locator("#file-chosen", { hasText: "blob.bin" }).waitFor();
  await page.click("#save");
  await page.locator("#status", { hasText: "Still trying" }).waitFor();
  assert.equal((await page.textContent("#save")).trim(), "Try again");
  await page.click("#save");
  await page.locator("#created").waitFor({ state: "visible" });
  assert.equal(posts.length, 2);
  assert.equal(posts[0].key, posts[1].key, "the retry of the upload reused its key");
  assert.equal(posts[0].type, "application/octet-stream");
  const id = await page.getAttribute("#created", "data-paste-id");
  assert.equal(id, lost.id, "one paste: the one the lost answer named");

  // The QR code of the share link, drawn in the page (the CSP allows no data: image).
  await page.locator("#qr svg").waitFor();
  await screenshot(page, "reader-created-with-qr");

  // The paste page: size, type, and a download link with the file's name.
  await page.click("#view-link");
  await page.waitForURL(`${BASE}/${id}`);
  await page.locator(".meta", { hasText: "3000 bytes" }).waitFor();
  const href = await page.getAttribute("#download", "href");
  assert.equal(href, `/raw/${id}?download`);
  const download = await page.request.get(`${BASE}${href}`);
  assert.match(download.headers()["content-disposition"], /^attachment; filename="blob.bin"/);
  assert.ok(Buffer.from(await download.body()).equals(bytes), "the download is byte-exact");
  await screenshot(page, "reader-binary-page");

  // Drag and drop onto the form chooses the file, too.
  await page.goto(`${BASE}/`);
  await page.evaluate(() => {
    const transfer = new DataTransfer();
    transfer.items.add(new File(["dropped text\n"], "notes.txt", { type: "text/plain" }));
    document.getElementById("new-paste").dispatchEvent(new DragEvent("drop", { dataTransfer: transfer, bubbles: true, cancelable: true }));
  });
  await page.locator("#file-chosen", { hasText: "notes.txt" }).waitFor();
  await page.click("#save");
  await page.locator("#created").waitFor({ state: "visible" });
  const dropped = await page.getAttribute("#created", "data-paste-id");
  assert.equal(posts[2].type, "text/plain; charset=utf-8", "a text file is saved as text");
  assert.deepEqual(problems, []);
  await context.close();
  return { fileId: id, fileKey: posts[0].key, fileBase64: bytes.toString("base64"), droppedId: dropped };
}

/** What a page shows for a time: "in 4 weeks", "now", "2 minutes ago". */
const RELATIVE = /^(now|in \d+ \w+|next \w+|\d+ \w+ ago|last \w+|tomorrow|yesterday)$/;
const EXACT_UTC = /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d+)? UTC$/;

/**
 * A page to share from. The form suggests the highlighter's languages; after
 * a save the address bar shows the paste's link while the one-time token
 * stays on screen with its warning; the paste page copies its link and its
 * content, shows the QR code when asked, and says times relatively with the
 * exact time on hover.
 */
async function sharing(browser) {
  const context = await browser.newContext({ viewport: { width: 1000, height: 900 } });
  await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: BASE });
  const page = await context.newPage();
  const problems = [];
  watch(page, problems);
  const clipboard = () => page.evaluate(() => navigator.clipboard.readText());

  await page.goto(`${BASE}/`);
  assert.equal(await page.getAttribute("#language", "list"), "languages");
  const languages = await page.$$eval("#languages option", (options) => options.map((option) => option.value));
  assert.ok(languages.length > 30, `a list of the highlighter's languages: ${languages}`);
  for (const language of ["Rust", "Python", "JavaScript"]) assert.ok(languages.includes(language), `${language} in ${languages}`);
  await page.fill("#content", RUST_SAMPLE);
  await page.fill("#language", "Rust");
  await page.click("#save");
  await page.locator("#created").waitFor({ state: "visible" });
  const id = await page.getAttribute("#created", "data-paste-id");
  const shareUrl = await page.inputValue("#share-url");
  assert.equal(page.url(), `${BASE}/${id}`, "the address bar shows the paste's link");
  // The gateway's --public-url names another host: the page shows the link this browser reached.
  assert.equal(shareUrl, `${BASE}/${id}`, "the share link is the address the browser reached");
  assert.equal(await page.inputValue("#raw-url"), `${BASE}/raw/${id}`);
  assert.equal(await page.locator("#qr svg").count(), 1, "the QR code of that link, drawn in the page");
  assert.ok((await page.inputValue("#delete-token")).length > 10, "the token is still on screen");
  await page.locator("#created .warning", { hasText: "will not be shown again" }).waitFor();
  const expires = page.locator("#created-expires");
  assert.match(await expires.textContent(), RELATIVE);
  assert.match(await expires.getAttribute("title"), EXACT_UTC);
  await screenshot(page, "share-saved");
  await page.screenshot({ path: path.join(ARTIFACTS, "paste-saved.png") });

  // A reload keeps the link (the paste's page), not the shown-once token.
  await page.reload();
  await page.locator("ol.code li").first().waitFor();
  assert.equal(await page.locator("#delete-token").count(), 0);
  assert.ok((await page.locator("ol.code span[class*='hl-']").count()) > 10, "the language from the list highlights");

  assert.equal(await page.inputValue("#page-url"), shareUrl);
  await page.click("button[data-copy=page-url]");
  await page.locator("button[data-copy=page-url]", { hasText: "Copied" }).waitFor();
  assert.equal(await clipboard(), shareUrl, "Copy link copies the share link");
  await page.click("#copy-content");
  await page.locator("#copy-content", { hasText: "Copied" }).waitFor();
  assert.equal(await clipboard(), RUST_SAMPLE.replace(/\n$/, ""), "Copy content copies the text as it is");

  assert.equal(await page.isVisible("#page-qr"), false, "the QR code waits until asked for");
  await page.click("details.qr summary");
  await page.locator("#page-qr svg").waitFor();
  const drawn = await page.$eval("#page-qr svg", (svg) => svg.getBoundingClientRect().width);
  assert.ok(drawn > 100, `the QR code of the link reached, drawn in the page: ${drawn} px`);

  const times = await page.$$eval(".meta time", (all) => all.map((t) => ({ text: t.textContent, title: t.title, at: t.dateTime })));
  assert.equal(times.length, 2, "created and expires");
  for (const time of times) {
    assert.match(time.text, RELATIVE);
    assert.equal(time.title, time.at.replace("T", " ").replace("Z", " UTC"), "the exact time on hover");
  }
  assert.match(times[0].text, /^now$|ago$/, "created just now");
  assert.match(times[1].text, /^(in|next) /, "expires later");
  // For the docs: the page as a reader first sees it, the QR code opened.
  await page.reload();
  await page.click("details.qr summary");
  await page.locator("#page-qr svg").waitFor();
  await page.screenshot({ path: path.join(ARTIFACTS, "paste-share.png") });

  // Free text beside the list: a language the highlighter does not know is plain text.
  await page.goto(`${BASE}/`);
  await page.fill("#content", "plain words");
  await page.fill("#language", "no-such-language");
  await page.click("#save");
  await page.locator("#created").waitFor({ state: "visible" });
  await page.click("#view-link");
  await page.locator("ol.code li", { hasText: "plain words" }).waitFor();
  assert.equal(await page.locator(".meta", { hasText: "no-such-language" }).count(), 1);

  assert.deepEqual(problems, []);
  await context.close();
  return { id };
}

/** A reader reports a paste from its page: the Report link, a reason, a note, sent. */
async function reportFromPage(browser, id) {
  const context = await browser.newContext({ viewport: { width: 1100, height: 800 } });
  const page = await context.newPage();
  const problems = [];
  watch(page, problems);
  await page.goto(`${BASE}/${id}`);
  await page.click("#report");
  await page.selectOption("#reason", "malware");
  await page.fill("#note", "from the browser");
  await screenshot(page, "report-form");
  await page.click("#send-report");
  await page.locator("#report-received").waitFor();
  assert.deepEqual(problems, []);
  await context.close();
  return { id, received: true };
}

const browser = await launch();
try {
  let result;
  if (phase === "create") {
    result = await createWithLostAnswer(browser);
  } else if (phase === "view-delete") {
    const [id, token] = args;
    await viewAndDeleteWithoutScript(browser, id, token);
    result = { id, ...(await scriptPasteIsText(browser)) };
  } else if (phase === "reader") {
    const highlightedId = await highlightedAndDark(browser);
    const burnId = await burnNotice(browser);
    result = { highlightedId, burnId, ...(await fileUpload(browser)) };
  } else if (phase === "share") {
    result = await sharing(browser);
  } else if (phase === "report") {
    result = await reportFromPage(browser, args[0]);
  } else {
    fail(`unknown phase ${phase}; use create, view-delete, reader, share or report`);
  }
  console.log(`RESULT ${JSON.stringify(result)}`);
} catch (error) {
  console.error(error && error.stack ? error.stack : error);
  process.exitCode = 1;
} finally {
  await browser.close();
}
