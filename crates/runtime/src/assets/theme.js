// Light or dark: the system's preference (prefers-color-scheme) unless the
// toggle in the header chose one, which is remembered in localStorage. Runs
// in <head> before the body paints, so a chosen theme never flashes the
// other one; each page's CSS does the rest (colours as variables, with a
// dark set under prefers-color-scheme and under :root[data-theme=dark]).
"use strict";

(function () {
  const KEY = "pastebin.theme";
  const root = document.documentElement;

  function stored() {
    try { return localStorage.getItem(KEY); } catch (error) { return null; }
  }

  function apply(theme) {
    if (theme === "light" || theme === "dark") root.dataset.theme = theme;
    else delete root.dataset.theme;
  }

  function current() {
    if (root.dataset.theme) return root.dataset.theme;
    return window.matchMedia && matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
  }

  apply(stored());

  document.addEventListener("DOMContentLoaded", function () {
    const toggle = document.getElementById("theme-toggle");
    if (!toggle) return;
    const label = function () {
      const dark = current() === "dark";
      toggle.textContent = dark ? "Light mode" : "Dark mode";
      toggle.setAttribute("aria-pressed", String(dark));
    };
    toggle.hidden = false;
    label();
    toggle.addEventListener("click", function () {
      const next = current() === "dark" ? "light" : "dark";
      apply(next);
      try { localStorage.setItem(KEY, next); } catch (error) { /* this page only */ }
      label();
    });
  });
})();
