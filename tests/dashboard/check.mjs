// Opens the pending-age dashboard in Debian's chromium (headless, through
// playwright-core), waits for the first data, and checks what an operator
// would look at: the level banner, the highlighted card row, the numbers,
// both plots (the count axis's labels distinct), the shard list, the rounds'
// cleanup errors, the edge refusals; no console error and no CSP violation;
// the dark mode toggle, remembered across a reload.
//
//   node check.mjs <dashboard-url> <expected-level> <screenshot.png> [<expected-move-text>...]
//
// With expected move texts, each must be in one line of "Slot moves in
// progress". Exit 0 when every check passed; 1 with one line per failed check.
import { mkdtempSync, rmSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { chromium } from "playwright-core";

const [url, expectedLevel, screenshot, ...expectedMove] = process.argv.slice(2);
if (!url || !expectedLevel || !screenshot) {
  console.error("usage: node check.mjs <dashboard-url> <expected-level> <screenshot.png>");
  process.exit(2);
}
const executablePath = process.env.CHROMIUM || "/usr/bin/chromium";
const userDataDir = mkdtempSync(join(tmpdir(), "pastebin-dashboard-"));
const failures = [];
const check = (ok, what) => {
  if (!ok) failures.push(what);
};

let context;
try {
  context = await chromium.launchPersistentContext(userDataDir, {
    executablePath,
    headless: true,
    viewport: { width: 1366, height: 900 },
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
  const page = context.pages()[0] || (await context.newPage());
  const problems = [];
  page.on("console", (message) => {
    if (message.type() === "error") problems.push("console error: " + message.text());
  });
  page.on("pageerror", (error) => problems.push("page error: " + error.message));
  page.on("requestfailed", (request) => problems.push("request failed: " + request.url()));
  page.on("response", (response) => {
    if (response.status() >= 400) problems.push("HTTP " + response.status() + " for " + response.url());
  });

  const response = await page.goto(url, { waitUntil: "load", timeout: 20000 });
  check(response && response.status() === 200, "the page answers 200");
  const csp = response ? response.headers()["content-security-policy"] || "" : "";
  check(csp.includes("script-src 'self'"), "the page is served with a Content-Security-Policy");

  // The first sample may take a few seconds: the page refreshes every 2 s.
  await page
    .waitForFunction((level) => document.body.dataset.level === level, expectedLevel, { timeout: 20000 })
    .catch(() => {});
  if (expectedMove.length > 0) {
    await page
      .waitForFunction(
        (texts) => [...document.querySelectorAll("#moving li")].some((li) => texts.every((t) => li.textContent.includes(t))),
        expectedMove,
        { timeout: 20000 },
      )
      .catch(() => {});
  }
  const seen = await page.evaluate(() => ({
    level: document.body.dataset.level,
    banner: document.getElementById("level-name").textContent,
    current: [...document.querySelectorAll("#card tbody tr.current")].map((tr) => tr.dataset.level),
    cardRows: document.querySelectorAll("#card tbody tr").length,
    oldest: document.getElementById("oldest").textContent,
    pending: document.getElementById("pending").textContent,
    agePoints: (document.querySelector("#plot-age polyline")?.getAttribute("points") || "").trim().split(/\s+/).filter(Boolean).length,
    countLines: document.querySelectorAll("#plot-count polyline").length,
    pasteShards: [...document.querySelectorAll("#paste-shards li")].map((li) => li.dataset.reachable),
    keyShards: document.querySelectorAll("#key-shards tbody tr").length,
    refusals: [...document.querySelectorAll("#edge-refusals tbody tr")].map((tr) => tr.innerText),
    moves: [...document.querySelectorAll("#moving li")].map((li) => li.textContent),
    // The count plot's y labels (its x labels are "−15 min" and "now").
    countTicks: [...document.querySelectorAll("#plot-count text.axis")].map((t) => t.textContent).filter((t) => /^\d/.test(t)),
    roundsHeader: [...document.querySelectorAll("#rounds thead th")].map((th) => th.textContent),
    rounds: [...document.querySelectorAll("#rounds tbody tr")].map((tr) => ({
      cells: [...tr.cells].map((td) => td.textContent),
      bad: tr.classList.contains("bad"),
    })),
    text: document.body.innerText,
  }));
  check(seen.level === expectedLevel, `level is ${expectedLevel} (page shows ${seen.level})`);
  check(seen.current.length === 1 && seen.current[0] === expectedLevel,
    `exactly the ${expectedLevel} card row is highlighted (highlighted: ${JSON.stringify(seen.current)})`);
  check(seen.cardRows === 4, `the card has 4 rows (${seen.cardRows})`);
  check(seen.oldest !== "–" && seen.oldest.length > 0, `the oldest pending age is shown (${seen.oldest})`);
  check(/^\d/.test(seen.pending), `the pending count is shown (${seen.pending})`);
  check(seen.agePoints >= 1, `the age plot has points (${seen.agePoints})`);
  check(seen.countLines === 2, `the count plot has its two series (${seen.countLines})`);
  check(seen.pasteShards.length >= 1 && seen.pasteShards.every((r) => r === "true"),
    `every P shard is shown reachable (${JSON.stringify(seen.pasteShards)})`);
  check(seen.keyShards >= 1, "the K shards are listed");
  check(/never mass-abort/i.test(seen.text), "the page says never mass-abort");
  check(seen.refusals.some((row) => /grpc/.test(row) && /client_streams/.test(row) && /\d/.test(row)),
    `the edge refusals are listed by protocol and reason (${JSON.stringify(seen.refusals)})`);
  check(seen.countTicks.length === 3 && new Set(seen.countTicks).size === 3,
    `the count plot's axis has three distinct labels (${JSON.stringify(seen.countTicks)})`);
  // A round whose cleanup calls failed shows it, in its own column, marked bad.
  const errorsColumn = seen.roundsHeader.indexOf("Cleanup errors");
  check(errorsColumn >= 0, `the rounds table has a "Cleanup errors" column (${JSON.stringify(seen.roundsHeader)})`);
  for (const round of seen.rounds) {
    check(round.cells.length === seen.roundsHeader.length,
      `a round's row has a cell under every heading (${JSON.stringify(round.cells)})`);
    check(round.cells[errorsColumn] === "0" || round.bad,
      `a round with cleanup errors is marked bad (${JSON.stringify(round.cells)})`);
  }
  if (expectedMove.length > 0) {
    check(seen.moves.some((line) => expectedMove.every((t) => line.includes(t))),
      `a slot move shows with ${JSON.stringify(expectedMove)} (moves shown: ${JSON.stringify(seen.moves)})`);
  }
  for (const problem of problems) failures.push(problem);

  mkdirSync(dirname(screenshot), { recursive: true });
  await page.screenshot({ path: screenshot, fullPage: true });

  // Dark mode: the toggle switches the page and the choice survives a reload.
  const background = () => page.evaluate(() => getComputedStyle(document.body).backgroundColor);
  const light = await background();
  await page.click("#theme-toggle");
  await page.reload({ waitUntil: "load" });
  const theme = await page.evaluate(() => document.documentElement.dataset.theme || null);
  check(theme === "dark", `the dark mode toggle is remembered across a reload (theme: ${theme})`);
  check((await background()) !== light, "dark mode changes the page's colours");
  await page.screenshot({ path: screenshot.replace(/\.png$/, "-dark.png"), fullPage: true });
  console.log(JSON.stringify({ level: seen.level, oldest: seen.oldest, pending: seen.pending, screenshot }));
} catch (error) {
  failures.push(`cannot drive ${executablePath}: ${error.message.split("\n")[0]}`);
} finally {
  if (context) await context.close().catch(() => {});
  rmSync(userDataDir, { recursive: true, force: true });
}

if (failures.length > 0) {
  for (const failure of failures) console.error("FAIL: " + failure);
  process.exit(1);
}
console.log("dashboard ok");
