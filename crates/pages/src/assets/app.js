// The new-paste page's save logic; on every page the copy buttons and
// relative times ("in 3 days", the exact time on hover).
//
// One save = one idempotency key. The key is made on the first submit of a
// text or a file and kept, with everything it belongs to (the text, or the
// file's name, size, date and type; expiry, language, burn), in
// sessionStorage until a 201 arrives. A timeout, a network error, a 408, a
// 429, any 5xx or a reload followed by "Try again" sends the same key again
// (after a 408, 429 or 5xx by itself, after its Retry-After, a few times),
// so the server replays or finishes the same save instead of making a
// second paste: the CLI retries the same answers the same way.
// Changing any of it after a failed attempt makes it a different save with a
// new key. A file is chosen with the picker or dropped on the form. After a
// save the address bar shows the paste's link (so a reload or a bookmark
// keeps it), while the screen still shows the one-time delete token.
//
// On a private instance (`--require-create-token`) the form has a create
// token field: the token is kept in localStorage, which belongs to this
// site's origin alone, so it is typed once; it goes only in the
// Authorization header of this site's saves, never in a link. sealed.js
// sends it the same way (window.pastebinCreateToken).
"use strict";

(function () {
  const STORE = "pastebin.pending-save";
  const TOKEN_STORE = "pastebin.create-token";
  const TIMEOUT_MS = 15000;
  // Automatic resends of the same save after a 408, 429 or 5xx, each after
  // the answer's Retry-After (at most MAX_RETRY_AFTER_S).
  const AUTO_RETRIES = 3;
  const MAX_RETRY_AFTER_S = 15;
  // Where the pending save lives if sessionStorage is unavailable (then it
  // survives retries on this page, not a reload).
  let memory = null;

  const form = document.getElementById("new-paste");
  const createToken = createTokenField();
  window.pastebinCreateToken = createToken;
  window.pastebinRetryAfter = retryAfter;
  window.pastebinLinkHere = linkHere;
  if (form) newPastePage(form);
  showPageLinkHere();
  wireCopyButtons();
  wireCopyContent();
  document.querySelectorAll("[data-needs-script]").forEach(function (element) { element.hidden = false; });
  document.querySelectorAll("time[data-relative]").forEach(showRelative);

  /**
   * How long to wait before sending the same save again after `response`,
   * or null when the answer is final. 408 (the server stopped waiting for
   * the request), 429 (too many saves: wait) and every 5xx (it may or may not
   * have been saved) are answers to retry with the same key
   * (docs/api.md#retries); any other 4xx is a definite "no". The wait is
   * the answer's Retry-After, 1 s without one, at most MAX_RETRY_AFTER_S.
   * sealed.js asks the same (window.pastebinRetryAfter).
   */
  function retryAfter(response) {
    if (response.status !== 408 && response.status !== 429 && response.status < 500) return null;
    const seconds = Number(response.headers.get("Retry-After")) || 1;
    return Math.min(Math.max(seconds, 1), MAX_RETRY_AFTER_S) * 1000;
  }

  function newPastePage(form) {
    const content = document.getElementById("content");
    const fileInput = document.getElementById("file");
    const fileChosen = document.getElementById("file-chosen");
    const dropZone = document.getElementById("drop-zone");
    const language = document.getElementById("language");
    const expiry = document.getElementById("expiry");
    const burn = document.getElementById("burn");
    const save = document.getElementById("save");
    const status = document.getElementById("status");
    const maxBytes = Number(form.dataset.maxBytes) || Infinity;
    let inFlight = false;
    // The file to save, from the picker or a drop; null: save the text.
    let chosenFile = null;

    const pending = loadPending();
    if (pending) {
      // A reload after an attempt whose answer never arrived: offer to finish it.
      expiry.value = String(pending.expires);
      language.value = pending.language;
      burn.checked = pending.burn;
      if (pending.kind === "text") {
        content.value = pending.content;
        say("trying", "An earlier save may not have finished. “Try again” finishes that same save; it never makes a second paste.");
      } else {
        // A file cannot be kept across a reload; the same file again is the same save.
        say("trying", "An earlier upload of “" + pending.file.name + "” may not have finished. Choose that same file again and press “Try again”: it finishes that same save and never makes a second paste.");
      }
    }
    updateButton();
    [content, language, expiry, burn].forEach(function (field) {
      field.addEventListener("input", updateButton);
      field.addEventListener("change", updateButton);
    });
    // sealed.js says when "Encrypt in the browser" is switched (form.dataset.sealing).
    form.addEventListener("sealingchange", updateButton);
    fileInput.addEventListener("change", function () {
      choose(fileInput.files && fileInput.files[0] ? fileInput.files[0] : null);
    });
    ["dragenter", "dragover"].forEach(function (name) {
      form.addEventListener(name, function (event) {
        if (!event.dataTransfer || Array.from(event.dataTransfer.types || []).indexOf("Files") < 0) return;
        event.preventDefault();
        dropZone.classList.add("over");
      });
    });
    form.addEventListener("dragleave", function () { dropZone.classList.remove("over"); });
    form.addEventListener("drop", function (event) {
      const files = event.dataTransfer && event.dataTransfer.files;
      if (!files || files.length === 0) return;
      event.preventDefault();
      dropZone.classList.remove("over");
      choose(files[0]);
    });

    function choose(file) {
      chosenFile = file;
      fileChosen.textContent = file ? "File: " + file.name + " (" + file.size + " bytes" + (file.type ? ", " + file.type : "") + "). The text box is ignored while a file is chosen." : "";
      if (!file) fileInput.value = "";
      updateButton();
    }

    /** What the form would save now, without a key. */
    function current() {
      const common = { expires: Number(expiry.value), language: language.value.trim(), burn: burn.checked };
      if (chosenFile) {
        const f = chosenFile;
        return Object.assign({ kind: "file", file: { name: f.name, size: f.size, lastModified: f.lastModified, type: f.type } }, common);
      }
      return Object.assign({ kind: "text", content: content.value }, common);
    }

    /** The same save: every field the request hash covers is unchanged. */
    function sameSave(attempt, now) {
      if (!attempt || attempt.kind !== now.kind || attempt.expires !== now.expires ||
          attempt.language !== now.language || attempt.burn !== now.burn) return false;
      if (now.kind === "text") return attempt.content === now.content;
      return ["name", "size", "lastModified", "type"].every(function (k) { return attempt.file[k] === now.file[k]; });
    }

    form.addEventListener("submit", function (event) {
      event.preventDefault();
      if (inFlight) return;
      const now = current();
      if (now.kind === "text" && now.content.length === 0) return say("bad", "Write something or choose a file to save first.");
      const size = now.kind === "file" ? now.file.size : new TextEncoder().encode(now.content).length;
      if (size > maxBytes) return say("bad", "This is larger than the limit of " + maxBytes + " bytes.");
      let attempt = loadPending();
      if (!sameSave(attempt, now)) {
        attempt = Object.assign({ key: crypto.randomUUID() }, now);
        storePending(attempt);
      }
      run(attempt);
    });

    /**
     * The button says "Try again" while what is on screen is an unfinished
     * save. A sealed save is labelled by sealed.js. The label is rewritten
     * only when it changes: replacing the button's text under a pressed
     * mouse lets the browser's scroll anchoring move the page between
     * mousedown and mouseup, and the click is lost.
     */
    function updateButton() {
      if (form.dataset.sealing === "true") return;
      const label = sameSave(loadPending(), current()) ? "Try again" : "Save paste";
      if (save.textContent !== label) save.textContent = label;
    }

    async function run(attempt) {
      inFlight = true;
      save.disabled = true;
      say("trying", "Saving…");
      try {
        for (let retry = 0; ; retry++) {
          const outcome = await send(attempt);
          if (outcome.kind === "created") {
            clearPending();
            return showCreated(outcome.body);
          }
          if (outcome.kind === "unavailable" && retry < AUTO_RETRIES) {
            say("trying", outcome.status === 429
              ? "Still trying… too many saves from here just now; waiting, then retrying the same save."
              : "Still trying… the service is busy; retrying the same save.");
            await sleep(outcome.retryAfterMs);
            continue;
          }
          return report(outcome);
        }
      } finally {
        inFlight = false;
        save.disabled = false;
        updateButton();
      }
    }

    function report(outcome) {
      switch (outcome.kind) {
        case "conflict":
          // The key was used for something else; this needs a save of its own.
          clearPending();
          return say("bad", "Conflict: this save's key was already used for a different paste, so nothing new was saved. Press “Save paste” to save this as a new paste.");
        case "rejected":
          // Step 1 refused it: nothing was stored under this key.
          clearPending();
          return say("bad", "Not saved: " + outcome.message);
        case "storage-full":
          return say("trying", "Not saved yet: this server's storage is full until its operator frees space. Your paste is kept here; “Try again” later saves it, and never twice.");
        case "unavailable":
          return say("trying", "Still trying: the service is busy. Your paste is kept; “Try again” finishes this same save and never makes a second paste.");
        default:
          return say("trying", "Still trying: no answer arrived, so the paste may or may not be saved yet. “Try again” finishes this same save and never makes a second paste.");
      }
    }

    /** Text goes as JSON; a file as its raw bytes with its own type, options in the query. */
    function request(attempt) {
      if (attempt.kind === "text") {
        const body = { content: attempt.content, expires_in_seconds: attempt.expires };
        if (attempt.language) body.language = attempt.language;
        if (attempt.burn) body.burn_after_reading = true;
        return { url: "/api/v1/pastes", type: "application/json", body: JSON.stringify(body) };
      }
      const query = new URLSearchParams({ expires_in_seconds: String(attempt.expires), file_name: attempt.file.name });
      if (attempt.language) query.set("language", attempt.language);
      if (attempt.burn) query.set("burn_after_reading", "true");
      // Text files are saved as text (highlighted, shown on the page); anything else as bytes with its type.
      const type = attempt.file.type || "application/octet-stream";
      return { url: "/api/v1/pastes?" + query, type: type.indexOf("text/") === 0 ? "text/plain; charset=utf-8" : type, body: chosenFile };
    }

    async function send(attempt) {
      if (attempt.kind === "file" && !chosenFile) return { kind: "rejected", message: "choose the file again first." };
      const controller = new AbortController();
      const timer = setTimeout(function () { controller.abort(); }, TIMEOUT_MS);
      try {
        const what = request(attempt);
        const response = await fetch(what.url, {
          method: "POST",
          headers: createToken.sign({ "Content-Type": what.type, "Accept": "application/json", "Idempotency-Key": attempt.key }),
          body: what.body,
          signal: controller.signal,
          cache: "no-store",
        });
        const body = await response.json().catch(function () { return null; });
        if (response.status === 201 && body) return { kind: "created", body: body };
        if (response.status === 409) return { kind: "conflict" };
        // The server's storage is full (docs/api.md): a save to try again later, with the same key.
        if (response.status === 507) return { kind: "storage-full" };
        const wait = retryAfter(response);
        if (wait !== null) return { kind: "unavailable", status: response.status, retryAfterMs: wait };
        if (response.status === 401) return { kind: "rejected", message: createToken.refused(body) };
        if (response.status >= 400 && response.status < 500) {
          const message = body && body.error ? body.error.message : "the request was refused (" + response.status + ")";
          return { kind: "rejected", message: message };
        }
        return { kind: "unknown" };
      } catch (error) {
        return { kind: "unknown" };
      } finally {
        clearTimeout(timer);
      }
    }

    function showCreated(body) {
      say("ok", "Saved.");
      document.getElementById("compose").hidden = true;
      document.getElementById("created").hidden = false;
      const link = linkHere(body.id);
      document.getElementById("share-url").value = link;
      document.getElementById("raw-url").value = linkHere("raw/" + body.id);
      document.getElementById("delete-token").value = body.delete_token;
      const expires = document.getElementById("created-expires");
      expires.dateTime = body.expires_at;
      expires.title = body.expires_at.replace("T", " ").replace("Z", " UTC");
      showRelative(expires);
      document.getElementById("view-link").href = "/" + encodeURIComponent(body.id);
      window.pastebinShowQr(document.getElementById("qr"), link);
      document.getElementById("created").dataset.pasteId = body.id;
      // The paste's own address, without reloading: the token stays on screen.
      history.replaceState(null, "", "/" + encodeURIComponent(body.id));
      content.value = "";
      choose(null);
    }

    function say(kind, message) {
      status.className = "status " + kind;
      status.textContent = message;
    }
  }

  /**
   * The create token field of a private instance's form, filled from this
   * browser's storage; `sign` adds the token to a save's headers (and keeps
   * it), `refused` forgets a token the server turned down and says so. On an
   * open instance there is no field and `sign` adds nothing.
   */
  function createTokenField() {
    const field = document.getElementById("create-token");
    if (!field) return { sign: function (headers) { return headers; }, refused: refusedWithoutField };
    try { field.value = localStorage.getItem(TOKEN_STORE) || ""; } catch (error) { /* typed each visit */ }
    document.getElementById("forget-token").addEventListener("click", function () {
      field.value = "";
      try { localStorage.removeItem(TOKEN_STORE); } catch (error) { /* nothing stored */ }
      field.focus();
    });
    return {
      sign: function (headers) {
        const token = field.value.trim();
        try { localStorage.setItem(TOKEN_STORE, token); } catch (error) { /* kept on this page only */ }
        return Object.assign({ "Authorization": "Bearer " + token }, headers);
      },
      refused: function (body) {
        try { localStorage.removeItem(TOKEN_STORE); } catch (error) { /* nothing stored */ }
        field.focus();
        return (body && body.error ? body.error.message : "the create token was refused") +
          ". Check the create token (it is no longer kept in this browser) and save again.";
      },
    };
  }

  function refusedWithoutField(body) {
    return body && body.error ? body.error.message : "a create token is needed";
  }

  /**
   * The link to `path` (a paste id, `raw/<id>`) as this browser reached this
   * instance: from the page's own address, never from the server's idea of
   * it (its --public-url, or a Host header a proxy may have rewritten), so
   * the link shown and its QR code open here for whoever was sent it.
   */
  function linkHere(path) {
    return location.origin + "/" + path.split("/").map(encodeURIComponent).join("/");
  }

  /** A paste page's share link and QR code: the address this page was reached at. */
  function showPageLinkHere() {
    const field = document.getElementById("page-url");
    if (!field) return;
    field.value = location.origin + location.pathname;
    const qr = document.getElementById("page-qr");
    // qr.js runs after this script; both have run before DOMContentLoaded.
    if (qr) document.addEventListener("DOMContentLoaded", function () { window.pastebinShowQr(qr, field.value); });
  }

  function wireCopyButtons() {
    document.querySelectorAll("button[data-copy]").forEach(function (button) {
      button.addEventListener("click", function () {
        const field = document.getElementById(button.dataset.copy);
        const done = function () { button.textContent = "Copied"; };
        if (navigator.clipboard && window.isSecureContext) {
          navigator.clipboard.writeText(field.value).then(done, function () { fallbackCopy(field, done); });
        } else {
          fallbackCopy(field, done);
        }
      });
    });
  }

  /** "Copy content": the paste's lines as text, as the page shows them. */
  function wireCopyContent() {
    const button = document.getElementById("copy-content");
    if (!button) return;
    button.addEventListener("click", function () {
      const text = Array.from(document.querySelectorAll("ol.code > li"), function (li) { return li.textContent; }).join("\n");
      const done = function () { button.textContent = "Copied"; };
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(text).then(done, function () { button.textContent = "Select the text to copy it"; });
      } else {
        button.textContent = "Select the text to copy it";
      }
    });
  }

  /** A `<time>` as "in 3 days" or "5 minutes ago"; its title keeps the exact time. */
  function showRelative(element) {
    const at = Date.parse(element.dateTime);
    if (Number.isNaN(at) || typeof Intl === "undefined" || !Intl.RelativeTimeFormat) return;
    const seconds = (at - Date.now()) / 1000;
    const units = [["year", 31536000], ["month", 2592000], ["week", 604800], ["day", 86400], ["hour", 3600], ["minute", 60]];
    const [unit, size] = units.find(function (u) { return Math.abs(seconds) >= u[1]; }) || ["second", 1];
    element.textContent = new Intl.RelativeTimeFormat("en", { numeric: "auto" }).format(Math.round(seconds / size), unit);
  }

  function fallbackCopy(field, done) {
    field.select();
    try {
      if (document.execCommand("copy")) done();
    } catch (error) {
      // The text stays selected for a manual copy.
    }
  }

  function loadPending() {
    let value;
    try {
      value = JSON.parse(sessionStorage.getItem(STORE) || "null");
    } catch (error) {
      value = memory;
    }
    const common = value && typeof value.key === "string" && typeof value.expires === "number" &&
      typeof value.language === "string" && typeof value.burn === "boolean";
    const text = common && value.kind === "text" && typeof value.content === "string";
    const file = common && value.kind === "file" && value.file && typeof value.file.name === "string";
    return text || file ? value : null;
  }

  function storePending(attempt) {
    memory = attempt;
    try { sessionStorage.setItem(STORE, JSON.stringify(attempt)); } catch (error) { /* kept in memory only */ }
  }

  function clearPending() {
    memory = null;
    try { sessionStorage.removeItem(STORE); } catch (error) { /* nothing stored */ }
  }

  function sleep(ms) {
    return new Promise(function (resolve) { setTimeout(resolve, ms); });
  }
})();
