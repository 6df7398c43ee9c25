// Sealed pastes (docs/reader-features.md#sealed-pastes), with the browser's
// Web Crypto and nothing else.
//
// On the new-paste page, "Encrypt in the browser": the text is encrypted
// here with AES-256-GCM under a new random 256-bit key (and, with a
// password, a key derived by PBKDF2-SHA-256 from that key and the
// password), and only the envelope (docs/api.md#sealed-pastes) is sent.
// The key goes into the share link's fragment (after "#"), which browsers
// never send to a server; it is never written to localStorage or
// sessionStorage. One save = one key, one IV, one envelope and one
// Idempotency-Key, all kept in memory until the 201 arrives: on any
// failure the identical request is sent again (the server replays it, it
// never makes a second paste); changing the text, password, expiry or
// burn after a failure makes a new save with a new key, IV and
// Idempotency-Key.
//
// On a sealed paste's page: the key from the fragment, the envelope from
// /raw/{id} (for a burn paste only after the reader says so: fetching it
// burns it), the password if the envelope asks for one, then the text with
// line numbers, copy, download and the link with its key. Without the key,
// or with a wrong one, the page says what is missing and shows nothing else.
"use strict";

(function () {
  const SEALED_TYPE = "application/vnd.pastebin.sealed+json";
  const ALGORITHM = "AES-256-GCM";
  const KDF = "PBKDF2-SHA-256";
  // OWASP's figure for PBKDF2-HMAC-SHA-256; readers refuse outside MIN..MAX.
  const ITERATIONS = 600000;
  const MIN_ITERATIONS = 100000;
  const MAX_ITERATIONS = 2000000;
  const TIMEOUT_MS = 15000;
  // Automatic resends of the same save before the page waits for "Try again".
  const RETRY_DELAYS_MS = [500, 1000, 2000, 4000, 8000];
  const RETRYING = "retrying the same save: it will not make a second paste";
  const CRYPTO_UNAVAILABLE = "this page was loaded over plain HTTP, and browsers offer the Web Crypto API " +
    "only to pages served over HTTPS (or from localhost)";
  const usable = Boolean(window.isSecureContext && window.crypto && window.crypto.subtle);

  const form = document.getElementById("new-paste");
  if (form) composePage(form);
  const sealedPaste = document.getElementById("sealed-paste");
  if (sealedPaste) readPage(sealedPaste);

  function composePage(form) {
    const encrypt = document.getElementById("encrypt");
    const passwordRow = document.getElementById("password-row");
    const password = document.getElementById("seal-password");
    const unavailable = document.getElementById("seal-unavailable");
    const content = document.getElementById("content");
    const fileInput = document.getElementById("file");
    const expiry = document.getElementById("expiry");
    const burn = document.getElementById("burn");
    const save = document.getElementById("save");
    const status = document.getElementById("status");
    const maxBytes = Number(form.dataset.maxBytes) || Infinity;
    // The save in progress: what was sealed, its envelope and keys. Memory only.
    let pending = null;
    let inFlight = false;

    if (!usable) {
      unavailable.hidden = false;
      unavailable.textContent = "Encryption in the browser is unavailable: " + CRYPTO_UNAVAILABLE + ". Open this page over HTTPS to encrypt.";
      return;
    }
    encrypt.disabled = false;
    encrypt.addEventListener("change", function () {
      passwordRow.hidden = !encrypt.checked;
      // app.js labels the button of a plain save, this script that of a sealed one.
      form.dataset.sealing = String(encrypt.checked);
      form.dispatchEvent(new Event("sealingchange"));
      updateButton();
    });
    [content, password, expiry, burn].forEach(function (field) {
      field.addEventListener("input", updateButton);
      field.addEventListener("change", updateButton);
    });

    // Ahead of app.js's own handler (capture on the document runs first):
    // a sealed save is this script's, start to end.
    document.addEventListener("submit", function (event) {
      if (event.target !== form || !encrypt.checked) return;
      event.preventDefault();
      event.stopImmediatePropagation();
      if (!inFlight) submit();
    }, true);

    function current() {
      return { text: content.value, password: password.value, expires: Number(expiry.value), burn: burn.checked };
    }

    function sameSave(attempt, now) {
      return Boolean(attempt) && attempt.text === now.text && attempt.password === now.password &&
        attempt.expires === now.expires && attempt.burn === now.burn;
    }

    function updateButton() {
      if (!encrypt.checked) return;
      // Only when it changes (why: app.js's updateButton).
      const label = sameSave(pending, current()) ? "Try again" : "Encrypt and save";
      if (save.textContent !== label) save.textContent = label;
    }

    async function submit() {
      const now = current();
      if (fileInput.files && fileInput.files.length > 0) return say("bad", "Encryption in the browser saves the text box: clear the chosen file first.");
      if (now.text.length === 0) return say("bad", "Write something to encrypt first.");
      inFlight = true;
      save.disabled = true;
      try {
        if (!sameSave(pending, now)) {
          say("trying", "Encrypting in this browser…");
          pending = Object.assign({ sealed: await seal(new TextEncoder().encode(now.text), now.password || null), idempotencyKey: crypto.randomUUID() }, now);
        }
        if (pending.sealed.envelope.length > maxBytes) {
          pending = null;
          return say("bad", "Encrypted, this is larger than the limit of " + maxBytes + " bytes.");
        }
        await run(pending);
      } catch (error) {
        say("bad", "Could not encrypt in this browser: " + error.message);
      } finally {
        inFlight = false;
        save.disabled = false;
        updateButton();
      }
    }

    async function run(attempt) {
      for (let retry = 0; ; retry++) {
        say("trying", retry === 0 ? "Saving the encrypted paste…" : "No answer yet: " + RETRYING + ".");
        const outcome = await send(attempt);
        if (outcome.kind === "created") {
          pending = null;
          return showCreated(outcome.body, attempt.sealed.fragment);
        }
        if (outcome.kind === "conflict") {
          pending = null;
          return say("bad", "Conflict: this save's key was already used for a different paste, so nothing new was saved. Press the button again to save this as a new paste.");
        }
        if (outcome.kind === "rejected") {
          pending = null;
          return say("bad", "Not saved: " + outcome.message);
        }
        if (retry >= RETRY_DELAYS_MS.length) {
          return say("trying", "Still no answer. Your encrypted save is kept on this page: “Try again” sends the identical request — " + RETRYING + ".");
        }
        say("trying", "The save did not finish: " + RETRYING + ".");
        await sleep(outcome.retryAfterMs || RETRY_DELAYS_MS[retry]);
        if (!sameSave(attempt, current())) {
          // Edited since: this is no longer the save on screen. The next
          // save seals the new text with a new key, IV and Idempotency-Key.
          pending = null;
          return say("bad", "The text or options changed, so the unconfirmed save stopped (it may or may not have been saved). “Encrypt and save” saves what is on screen now, as a new paste.");
        }
      }
    }

    /** One attempt: the identical bytes under the identical Idempotency-Key. */
    async function send(attempt) {
      const query = new URLSearchParams({ expires_in_seconds: String(attempt.expires) });
      if (attempt.burn) query.set("burn_after_reading", "true");
      const controller = new AbortController();
      const timer = setTimeout(function () { controller.abort(); }, TIMEOUT_MS);
      try {
        const response = await fetch("/api/v1/pastes?" + query, {
          method: "POST",
          headers: window.pastebinCreateToken.sign({ "Content-Type": SEALED_TYPE, "Accept": "application/json", "Idempotency-Key": attempt.idempotencyKey }),
          body: attempt.sealed.envelope,
          signal: controller.signal,
          cache: "no-store",
        });
        const body = await response.json().catch(function () { return null; });
        if (response.status === 201 && body && body.id) return { kind: "created", body: body };
        if (response.status === 409) return { kind: "conflict" };
        // 408, 429 and 5xx: the same request again after Retry-After, as app.js does.
        const wait = window.pastebinRetryAfter(response);
        if (wait !== null) return { kind: "unknown", retryAfterMs: wait };
        if (response.status === 401) return { kind: "rejected", message: window.pastebinCreateToken.refused(body) };
        if (response.status >= 400 && response.status < 500) {
          return { kind: "rejected", message: body && body.error ? body.error.message : "the request was refused (" + response.status + ")" };
        }
        return { kind: "unknown" };
      } catch (error) {
        return { kind: "unknown" };
      } finally {
        clearTimeout(timer);
      }
    }

    function showCreated(body, fragment) {
      const link = window.pastebinLinkHere(body.id) + "#" + fragment;
      say("ok", "Saved, encrypted. The key is only in the link below.");
      document.getElementById("compose").hidden = true;
      const created = document.getElementById("created");
      created.hidden = false;
      created.dataset.pasteId = body.id;
      created.dataset.sealed = "true";
      document.getElementById("share-url").value = link;
      // The raw link serves the envelope, not the text: not offered here.
      const raw = document.getElementById("raw-url");
      raw.parentElement.hidden = true;
      document.querySelector("label[for=raw-url]").hidden = true;
      document.getElementById("delete-token").value = body.delete_token;
      const expires = document.getElementById("created-expires");
      expires.dateTime = body.expires_at;
      expires.textContent = body.expires_at.replace("T", " ").replace("Z", " UTC");
      document.getElementById("view-link").href = "/" + encodeURIComponent(body.id) + "#" + fragment;
      window.pastebinShowQr(document.getElementById("qr"), link);
      history.replaceState(null, "", "/" + encodeURIComponent(body.id) + "#" + fragment);
      content.value = "";
      password.value = "";
    }

    function say(kind, message) {
      status.className = "status " + kind;
      status.textContent = message;
    }
  }

  function readPage(section) {
    const id = section.dataset.id;
    const burn = section.dataset.burn === "true";
    const status = document.getElementById("sealed-status");
    const say = function (kind, message) { status.className = "status " + kind; status.textContent = message; };
    if (!usable) return say("bad", "This paste is encrypted and cannot be opened here: " + CRYPTO_UNAVAILABLE + ". Open the link over HTTPS, or use “pastebin get” with the whole link.");
    const fragment = location.hash.replace(/^#/, "");
    if (fragment === "") return say("bad", "This paste is encrypted, and this link has no key: the part after “#” is missing. Ask for the whole link; the server does not have the key.");
    const key = decodeKey(fragment);
    if (!key) return say("bad", "This paste is encrypted, and the key after “#” in this link is damaged (it must be 43 letters, digits, “-” or “_”). Copy the whole link again.");
    if (burn) {
      const notice = document.getElementById("sealed-burn");
      notice.hidden = false;
      say("", "");
      document.getElementById("sealed-reveal").addEventListener("click", function () {
        notice.hidden = true;
        fetchAndOpen();
      }, { once: true });
    } else {
      fetchAndOpen();
    }

    async function fetchAndOpen() {
      say("trying", "Fetching the encrypted paste…");
      let response;
      try {
        response = await fetch("/raw/" + encodeURIComponent(id), { cache: "no-store" });
      } catch (error) {
        return say("bad", "The encrypted paste could not be fetched (no answer). Reload the page to try again.");
      }
      if (response.status === 404) return say("bad", "There is no paste here. It may have expired, been deleted or, if it burned after reading, been read already.");
      if (!response.ok) return say("bad", "The encrypted paste could not be fetched (" + response.status + "). Reload the page to try again.");
      const envelope = parseEnvelope(new Uint8Array(await response.arrayBuffer()));
      if (!envelope) return say("bad", "What the server holds for this paste is not an envelope this page can read.");
      if (!envelope.password) return open(envelope, null);
      const askForm = document.getElementById("sealed-password");
      const input = document.getElementById("sealed-password-input");
      askForm.hidden = false;
      say("", "This paste also needs its password.");
      input.focus();
      askForm.addEventListener("submit", function (event) {
        event.preventDefault();
        if (input.value === "") return;
        say("trying", "Opening…");
        open(envelope, input.value).then(function (opened) { if (opened) askForm.hidden = true; });
      });
    }

    async function open(envelope, password) {
      let plaintext;
      try {
        const aes = await aesKey(key, password, envelope.password, ["decrypt"]);
        plaintext = new Uint8Array(await crypto.subtle.decrypt({ name: "AES-GCM", iv: envelope.iv }, aes, envelope.ciphertext));
      } catch (error) {
        say("bad", password === null
          ? "The key in this link does not open this paste: the link may be damaged or cut short. Nothing is shown."
          : "The password or the link's key is wrong: nothing is shown. Check the password and try again.");
        return false;
      }
      show(plaintext);
      return true;
    }

    function show(plaintext) {
      const text = new TextDecoder().decode(plaintext);
      const list = document.getElementById("sealed-lines");
      const lines = text.split(/\r?\n/);
      if (lines.length > 1 && lines[lines.length - 1] === "") lines.pop();
      lines.forEach(function (line) {
        const item = document.createElement("li");
        item.textContent = line;
        list.appendChild(item);
      });
      const link = document.getElementById("page-url");
      link.value = link.value + "#" + fragment;
      document.getElementById("sealed-download").addEventListener("click", function () {
        const url = URL.createObjectURL(new Blob([plaintext], { type: "text/plain;charset=utf-8" }));
        const anchor = document.createElement("a");
        anchor.href = url;
        anchor.download = id + ".txt";
        document.body.appendChild(anchor);
        anchor.click();
        anchor.remove();
        setTimeout(function () { URL.revokeObjectURL(url); }, 1000);
      });
      if (burn) {
        // Nothing left to link to: the one read was this one.
        link.parentElement.querySelector("[data-copy=page-url]").hidden = true;
        link.hidden = true;
        document.getElementById("sealed-qr-box").hidden = true;
        say("bad", "This paste was burned after reading: it is deleted now, and this is the only time it is shown. Copy what you need before you leave.");
      } else {
        window.pastebinShowQr(document.getElementById("sealed-qr"), link.value);
        say("ok", "Decrypted in this browser; the server never had the key.");
      }
      document.getElementById("sealed-opened").hidden = false;
    }
  }

  /** A new key, IV (and salt); the envelope's bytes and the fragment. */
  async function seal(plaintext, password) {
    const key = crypto.getRandomValues(new Uint8Array(32));
    const iv = crypto.getRandomValues(new Uint8Array(12));
    const params = password === null ? null : { salt: crypto.getRandomValues(new Uint8Array(16)), iterations: ITERATIONS };
    const aes = await aesKey(key, password, params, ["encrypt"]);
    const ciphertext = new Uint8Array(await crypto.subtle.encrypt({ name: "AES-GCM", iv: iv }, aes, plaintext));
    const wire = { version: 1, algorithm: ALGORITHM, iv: base64url(iv), ciphertext: base64url(ciphertext) };
    if (params) wire.password = { kdf: KDF, salt: base64url(params.salt), iterations: params.iterations };
    return { envelope: new TextEncoder().encode(JSON.stringify(wire)), fragment: base64url(key) };
  }

  /** The AES key: the fragment's key, or PBKDF2-SHA-256 over it followed by the password's UTF-8. */
  async function aesKey(key, password, params, usages) {
    if (!params) return crypto.subtle.importKey("raw", key, { name: "AES-GCM" }, false, usages);
    const secret = new TextEncoder().encode(password || "");
    const material = new Uint8Array(key.length + secret.length);
    material.set(key);
    material.set(secret, key.length);
    const base = await crypto.subtle.importKey("raw", material, { name: "PBKDF2" }, false, ["deriveKey"]);
    return crypto.subtle.deriveKey(
      { name: "PBKDF2", hash: "SHA-256", salt: params.salt, iterations: params.iterations },
      base, { name: "AES-GCM", length: 256 }, false, usages);
  }

  /** The envelope's fields, checked as the server and the CLI check them; null if it is not one. */
  function parseEnvelope(bytes) {
    let wire;
    try {
      wire = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
    } catch (error) {
      return null;
    }
    if (!wire || wire.version !== 1 || wire.algorithm !== ALGORITHM) return null;
    const iv = fromBase64url(wire.iv);
    const ciphertext = fromBase64url(wire.ciphertext);
    if (!iv || iv.length !== 12 || !ciphertext || ciphertext.length < 16) return null;
    let password = null;
    if (wire.password !== undefined) {
      const p = wire.password;
      const salt = p && fromBase64url(p.salt);
      if (!p || p.kdf !== KDF || !salt || salt.length !== 16 || !Number.isInteger(p.iterations) ||
          p.iterations < MIN_ITERATIONS || p.iterations > MAX_ITERATIONS) return null;
      password = { salt: salt, iterations: p.iterations };
    }
    return { iv: iv, ciphertext: ciphertext, password: password };
  }

  function decodeKey(fragment) {
    const key = fromBase64url(fragment);
    return key && key.length === 32 ? key : null;
  }

  function base64url(bytes) {
    let binary = "";
    for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
    return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  }

  function fromBase64url(text) {
    if (typeof text !== "string" || !/^[A-Za-z0-9_-]*$/.test(text) || text.length % 4 === 1) return null;
    const binary = atob(text.replace(/-/g, "+").replace(/_/g, "/") + "===".slice((text.length + 3) % 4));
    return Uint8Array.from(binary, function (c) { return c.charCodeAt(0); });
  }

  function sleep(ms) {
    return new Promise(function (resolve) { setTimeout(resolve, ms); });
  }
})();
