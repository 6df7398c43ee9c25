// A QR code drawn in the page: `window.pastebinQr(text)` returns an SVG
// string (or null if the text is too long), and `window.pastebinShowQr(target,
// link)` puts it in place of `target`. For the link as this browser reached
// the paste (the server knows only its --public-url) and for a sealed paste's
// link (docs/reader-features.md#sealed-pastes), whose key the server must
// never see: the server draws `/{id}/qr.svg` only for pages without script.
//
// ISO/IEC 18004 in byte mode at error correction level M, versions 1 to 40,
// after Project Nayuki's QR Code generator (MIT): data, Reed-Solomon blocks,
// function patterns, the zigzag placement, and the mask with the lowest
// penalty (rules 1, 2 and 4 of the standard's four; any mask scans).
"use strict";

(function () {
  // Level M, indexed by version (0 unused).
  const ECC_PER_BLOCK = [-1, 10, 16, 26, 18, 24, 16, 18, 22, 22, 26, 30, 22, 22, 24, 24, 28, 28, 26, 26, 26, 26, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28];
  const BLOCKS = [-1, 1, 1, 1, 2, 2, 4, 4, 4, 5, 5, 5, 8, 9, 9, 10, 10, 11, 13, 14, 16, 17, 17, 18, 20, 21, 23, 25, 26, 28, 29, 31, 33, 35, 37, 38, 40, 43, 45, 47, 49];
  const FORMAT_BITS_M = 0;

  function rawModules(version) {
    let result = (16 * version + 128) * version + 64;
    if (version >= 2) {
      const align = Math.floor(version / 7) + 2;
      result -= (25 * align - 10) * align - 55;
      if (version >= 7) result -= 36;
    }
    return result;
  }

  function dataCodewords(version) {
    return Math.floor(rawModules(version) / 8) - ECC_PER_BLOCK[version] * BLOCKS[version];
  }

  function multiply(x, y) {
    let z = 0;
    for (let i = 7; i >= 0; i--) {
      z = (z << 1) ^ ((z >>> 7) * 0x11d);
      z ^= ((y >>> i) & 1) * x;
    }
    return z & 0xff;
  }

  function divisor(degree) {
    const result = new Array(degree).fill(0);
    result[degree - 1] = 1;
    let root = 1;
    for (let i = 0; i < degree; i++) {
      for (let j = 0; j < degree; j++) {
        result[j] = multiply(result[j], root);
        if (j + 1 < degree) result[j] ^= result[j + 1];
      }
      root = multiply(root, 0x02);
    }
    return result;
  }

  function remainder(data, by) {
    const result = new Array(by.length).fill(0);
    for (const byte of data) {
      const factor = byte ^ result.shift();
      result.push(0);
      by.forEach(function (coefficient, i) { result[i] ^= multiply(coefficient, factor); });
    }
    return result;
  }

  /** The data codewords of `bytes` in byte mode, padded to fill `version`. */
  function encode(bytes, version) {
    const bits = [];
    const put = function (value, length) { for (let i = length - 1; i >= 0; i--) bits.push((value >>> i) & 1); };
    put(4, 4);
    put(bytes.length, version < 10 ? 8 : 16);
    bytes.forEach(function (byte) { put(byte, 8); });
    const capacity = dataCodewords(version) * 8;
    put(0, Math.min(4, capacity - bits.length));
    put(0, (8 - (bits.length % 8)) % 8);
    for (let pad = 0xec; bits.length < capacity; pad ^= 0xec ^ 0x11) put(pad, 8);
    const codewords = [];
    for (let i = 0; i < bits.length; i += 8) codewords.push(parseInt(bits.slice(i, i + 8).join(""), 2));
    return codewords;
  }

  function withEcc(data, version) {
    const blocks = BLOCKS[version];
    const eccLength = ECC_PER_BLOCK[version];
    const raw = Math.floor(rawModules(version) / 8);
    const shortBlocks = blocks - (raw % blocks);
    const shortLength = Math.floor(raw / blocks);
    const by = divisor(eccLength);
    const all = [];
    for (let i = 0, k = 0; i < blocks; i++) {
      const block = data.slice(k, k + shortLength - eccLength + (i < shortBlocks ? 0 : 1));
      k += block.length;
      const ecc = remainder(block, by);
      if (i < shortBlocks) block.push(0);
      all.push(block.concat(ecc));
    }
    const result = [];
    for (let i = 0; i < all[0].length; i++) {
      all.forEach(function (block, j) {
        if (i !== shortLength - eccLength || j >= shortBlocks) result.push(block[i]);
      });
    }
    return result;
  }

  function alignmentPositions(version) {
    if (version === 1) return [];
    const count = Math.floor(version / 7) + 2;
    const step = version === 32 ? 26 : Math.ceil((version * 4 + 4) / (count * 2 - 2)) * 2;
    const result = [6];
    for (let position = version * 4 + 10; result.length < count; position -= step) result.splice(1, 0, position);
    return result;
  }

  function symbol(codewords, version) {
    const size = version * 4 + 17;
    const dark = [];
    const fixed = [];
    for (let y = 0; y < size; y++) {
      dark.push(new Array(size).fill(false));
      fixed.push(new Array(size).fill(false));
    }
    const set = function (x, y, value) { dark[y][x] = value; fixed[y][x] = true; };
    for (let i = 0; i < size; i++) {
      set(6, i, i % 2 === 0);
      set(i, 6, i % 2 === 0);
    }
    [[3, 3], [size - 4, 3], [3, size - 4]].forEach(function (centre) {
      for (let dy = -4; dy <= 4; dy++) {
        for (let dx = -4; dx <= 4; dx++) {
          const x = centre[0] + dx;
          const y = centre[1] + dy;
          const distance = Math.max(Math.abs(dx), Math.abs(dy));
          if (x >= 0 && x < size && y >= 0 && y < size) set(x, y, distance !== 2 && distance !== 4);
        }
      }
    });
    const positions = alignmentPositions(version);
    const last = positions.length - 1;
    positions.forEach(function (px, i) {
      positions.forEach(function (py, j) {
        if ((i === 0 && j === 0) || (i === 0 && j === last) || (i === last && j === 0)) return;
        for (let dy = -2; dy <= 2; dy++) {
          for (let dx = -2; dx <= 2; dx++) set(px + dx, py + dy, Math.max(Math.abs(dx), Math.abs(dy)) !== 1);
        }
      });
    });
    drawFormat(set, size, 0);
    if (version >= 7) {
      let rem = version;
      for (let i = 0; i < 12; i++) rem = (rem << 1) ^ ((rem >>> 11) * 0x1f25);
      const bits = (version << 12) | rem;
      for (let i = 0; i < 18; i++) {
        const bit = ((bits >>> i) & 1) === 1;
        const a = size - 11 + (i % 3);
        const b = Math.floor(i / 3);
        set(a, b, bit);
        set(b, a, bit);
      }
    }
    let i = 0;
    for (let right = size - 1; right >= 1; right -= 2) {
      if (right === 6) right = 5;
      for (let vertical = 0; vertical < size; vertical++) {
        for (let j = 0; j < 2; j++) {
          const x = right - j;
          const upward = ((right + 1) & 2) === 0;
          const y = upward ? size - 1 - vertical : vertical;
          if (!fixed[y][x] && i < codewords.length * 8) {
            dark[y][x] = ((codewords[i >>> 3] >>> (7 - (i & 7))) & 1) === 1;
            i++;
          }
        }
      }
    }
    return { size: size, dark: dark, fixed: fixed, set: set };
  }

  function drawFormat(set, size, mask) {
    const data = (FORMAT_BITS_M << 3) | mask;
    let rem = data;
    for (let i = 0; i < 10; i++) rem = (rem << 1) ^ ((rem >>> 9) * 0x537);
    const bits = ((data << 10) | rem) ^ 0x5412;
    const bit = function (i) { return ((bits >>> i) & 1) === 1; };
    for (let i = 0; i <= 5; i++) set(8, i, bit(i));
    set(8, 7, bit(6));
    set(8, 8, bit(7));
    set(7, 8, bit(8));
    for (let i = 9; i < 15; i++) set(14 - i, 8, bit(i));
    for (let i = 0; i < 8; i++) set(size - 1 - i, 8, bit(i));
    for (let i = 8; i < 15; i++) set(8, size - 15 + i, bit(i));
    set(8, size - 8, true);
  }

  const MASKS = [
    function (x, y) { return (x + y) % 2 === 0; },
    function (x, y) { return y % 2 === 0; },
    function (x) { return x % 3 === 0; },
    function (x, y) { return (x + y) % 3 === 0; },
    function (x, y) { return (Math.floor(x / 3) + Math.floor(y / 2)) % 2 === 0; },
    function (x, y) { return ((x * y) % 2) + ((x * y) % 3) === 0; },
    function (x, y) { return (((x * y) % 2) + ((x * y) % 3)) % 2 === 0; },
    function (x, y) { return (((x + y) % 2) + ((x * y) % 3)) % 2 === 0; },
  ];

  function masked(code, mask) {
    const dark = code.dark.map(function (row, y) {
      return row.map(function (value, x) { return code.fixed[y][x] ? value : value !== MASKS[mask](x, y); });
    });
    const set = function (x, y, value) { dark[y][x] = value; };
    drawFormat(set, code.size, mask);
    return dark;
  }

  /** Runs of five or more, 2x2 blocks, and the dark/light balance. */
  function penalty(dark) {
    const size = dark.length;
    let score = 0;
    let darkCount = 0;
    for (let a = 0; a < size; a++) {
      let rowRun = 1;
      let columnRun = 1;
      for (let b = 0; b < size; b++) {
        if (dark[a][b]) darkCount++;
        if (b > 0) {
          rowRun = dark[a][b] === dark[a][b - 1] ? rowRun + 1 : 1;
          columnRun = dark[b][a] === dark[b - 1][a] ? columnRun + 1 : 1;
          if (rowRun === 5) score += 3; else if (rowRun > 5) score += 1;
          if (columnRun === 5) score += 3; else if (columnRun > 5) score += 1;
        }
        if (a > 0 && b > 0 && dark[a][b] === dark[a - 1][b] && dark[a][b] === dark[a][b - 1] && dark[a][b] === dark[a - 1][b - 1]) score += 3;
      }
    }
    const total = size * size;
    score += Math.floor(Math.abs(darkCount * 20 - total * 10) / total) * 10;
    return score;
  }

  window.pastebinQr = function (text) {
    const bytes = Array.from(new TextEncoder().encode(text));
    let version = 1;
    while (version <= 40 && 4 + (version < 10 ? 8 : 16) + bytes.length * 8 > dataCodewords(version) * 8) version++;
    if (version > 40) return null;
    const code = symbol(withEcc(encode(bytes, version), version), version);
    let best = null;
    for (let mask = 0; mask < 8; mask++) {
      const dark = masked(code, mask);
      const score = penalty(dark);
      if (!best || score < best.score) best = { dark: dark, score: score };
    }
    const border = 4;
    const side = code.size + border * 2;
    let path = "";
    best.dark.forEach(function (row, y) {
      row.forEach(function (value, x) { if (value) path += "M" + (x + border) + "," + (y + border) + "h1v1h-1z"; });
    });
    return "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 " + side + " " + side + "\" width=\"164\" height=\"164\" " +
      "shape-rendering=\"crispEdges\" role=\"img\" aria-label=\"QR code of the link\"><rect width=\"" + side + "\" height=\"" + side +
      "\" fill=\"#fff\"/><path d=\"" + path + "\" fill=\"#000\"/></svg>";
  };

  /** `link` as a QR code in place of `target` (an <img> is replaced, anything else filled). */
  window.pastebinShowQr = function (target, link) {
    const svg = window.pastebinQr(link);
    const holder = document.createElement("span");
    holder.className = "qr-drawn";
    if (svg) holder.innerHTML = svg; // built from numbers only, never from the link's text
    if (target.tagName === "IMG") {
      holder.id = target.id;
      target.replaceWith(holder);
    } else {
      target.replaceChildren(holder);
    }
  };
})();
