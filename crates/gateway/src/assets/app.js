// The new-paste page's save logic, and the copy buttons.
//
// One save = one idempotency key. The key is made on the first submit of a
// text and kept, with the text and expiry it belongs to, in sessionStorage
// until a 201 arrives. A timeout, a network error, a 503 or a reload followed
// by "Try again" sends the same key again, so the server replays or finishes
// the same save instead of making a second paste. Changing the text or the
// expiry after a failed attempt makes it a different save with a new key.
"use strict";

(function () {
  const STORE = "pastebin.pending-save";
  const TIMEOUT_MS = 15000;
  const AUTO_RETRIES_ON_503 = 2;
  // Where the pending save lives if sessionStorage is unavailable (then it
  // survives retries on this page, not a reload).
  let memory = null;

  const form = document.getElementById("new-paste");
  if (form) newPastePage(form);
  wireCopyButtons();

  function newPastePage(form) {
    const content = document.getElementById("content");
    const expiry = document.getElementById("expiry");
    const save = document.getElementById("save");
    const status = document.getElementById("status");
    const maxBytes = Number(form.dataset.maxBytes) || Infinity;
    let inFlight = false;

    const pending = loadPending();
    if (pending) {
      // A reload after an attempt whose answer never arrived: offer to finish it.
      content.value = pending.content;
      expiry.value = String(pending.expires);
      say("trying", "An earlier save may not have finished. “Try again” finishes that same save; it never makes a second paste.");
    }
    updateButton();
    content.addEventListener("input", updateButton);
    expiry.addEventListener("change", updateButton);

    form.addEventListener("submit", function (event) {
      event.preventDefault();
      if (inFlight) return;
      const text = content.value;
      const expires = Number(expiry.value);
      if (text.length === 0) return say("bad", "Write something to save first.");
      if (new TextEncoder().encode(text).length > maxBytes) {
        return say("bad", "This text is larger than the limit of " + maxBytes + " bytes.");
      }
      let attempt = loadPending();
      if (!attempt || attempt.content !== text || attempt.expires !== expires) {
        attempt = { key: crypto.randomUUID(), content: text, expires: expires };
        storePending(attempt);
      }
      run(attempt);
    });

    /** The button says "Try again" while the text on screen is an unfinished save. */
    function updateButton() {
      const attempt = loadPending();
      const same = attempt && attempt.content === content.value && attempt.expires === Number(expiry.value);
      save.textContent = same ? "Try again" : "Save paste";
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
          if (outcome.kind === "unavailable" && retry < AUTO_RETRIES_ON_503) {
            say("trying", "Still trying… the service is busy; retrying the same save.");
            await sleep(outcome.retryAfter * 1000);
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
          // The key was used for something else; this text needs a save of its own.
          clearPending();
          return say("bad", "Conflict: this save's key was already used for a different paste, so nothing new was saved. Press “Save paste” to save this text as a new paste.");
        case "rejected":
          // Step 1 refused it: nothing was stored under this key.
          clearPending();
          return say("bad", "Not saved: " + outcome.message);
        case "unavailable":
          return say("trying", "Still trying: the service is busy. Your text is kept; “Try again” finishes this same save and never makes a second paste.");
        default:
          return say("trying", "Still trying: no answer arrived, so the paste may or may not be saved yet. “Try again” finishes this same save and never makes a second paste.");
      }
    }

    async function send(attempt) {
      const controller = new AbortController();
      const timer = setTimeout(function () { controller.abort(); }, TIMEOUT_MS);
      try {
        const response = await fetch("/api/v1/pastes", {
          method: "POST",
          headers: { "Content-Type": "application/json", "Accept": "application/json", "Idempotency-Key": attempt.key },
          body: JSON.stringify({ content: attempt.content, expires_in_seconds: attempt.expires }),
          signal: controller.signal,
          cache: "no-store",
        });
        const body = await response.json().catch(function () { return null; });
        if (response.status === 201 && body) return { kind: "created", body: body };
        if (response.status === 409) return { kind: "conflict" };
        if (response.status === 503) {
          const retryAfter = Number(response.headers.get("Retry-After")) || 1;
          return { kind: "unavailable", retryAfter: Math.min(retryAfter, 10) };
        }
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
      document.getElementById("share-url").value = body.url;
      document.getElementById("raw-url").value = body.raw_url;
      document.getElementById("delete-token").value = body.delete_token;
      document.getElementById("created-expires").textContent = body.expires_at;
      document.getElementById("view-link").href = "/" + encodeURIComponent(body.id);
      document.getElementById("created").dataset.pasteId = body.id;
      content.value = "";
    }

    function say(kind, message) {
      status.className = "status " + kind;
      status.textContent = message;
    }
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
    const valid = value && typeof value.key === "string" && typeof value.content === "string" && typeof value.expires === "number";
    return valid ? value : null;
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
