// qkv attention page: saving a view as PNG or SVG (plain JavaScript, loaded before explorer.js
// in the same <script>; it defines one name, qkvExport, and touches no page element itself).
//
// PNG: the view's pixels composed with its labels and a title on one canvas (toBlob).
// SVG: built from the view's data, real vector output: a token matrix as one <rect> per cell
// with its fill colour, the tokens as <text>, a <title> and a visible title naming the layer
// and head; an image view as the image (its data: URL) under one <rect> per region. A token
// matrix of more than MAX_SVG_CELLS cells is not written as SVG (the button says so): its
// file would run to many megabytes; its PNG is still offered.
// Both are downloaded through a link to a blob: URL (in a notebook's frame this needs the
// sandbox's allow-downloads; nothing else leaves the frame).
const qkvExport = (function () {
  "use strict";

  const SVG_NS = "http://www.w3.org/2000/svg";
  const MAX_SVG_CELLS = 65536; // 256 x 256 tokens
  const MAX_PNG_SIDE = 4096; // px: the longest side of an exported matrix
  const FONT = "12px system-ui, -apple-system, 'Segoe UI', sans-serif";
  const TITLE_FONT = "bold 14px system-ui, -apple-system, 'Segoe UI', sans-serif";

  function hex([r, g, b]) {
    return "#" + [r, g, b].map((c) => Math.round(c).toString(16).padStart(2, "0")).join("");
  }

  function node(tag, attrs, text) {
    const n = document.createElementNS(SVG_NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) n.setAttribute(k, String(v));
    if (text !== undefined) n.textContent = String(text);
    return n;
  }

  // Text width in px with the export's font (a canvas measures it).
  const measurer = document.createElement("canvas").getContext("2d");
  function textWidth(text, font) {
    measurer.font = font || FONT;
    return measurer.measureText(text).width;
  }

  function serialised(root) {
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + new XMLSerializer().serializeToString(root);
  }

  // A token matrix (Tq x Tk weights) as SVG text: title, key labels (rotated) on top, query
  // labels on the left, one rect per cell filled with colour(i, j) ("#rrggbb").
  // Returns null when the matrix has more than MAX_SVG_CELLS cells.
  function matrixSvg(title, queries, keys, matrix, colour) {
    if (queries.length * keys.length > MAX_SVG_CELLS) return null;
    const cell = 16;
    const left = Math.ceil(Math.min(200, Math.max(20, ...queries.map((q) => textWidth(q))))) + 8;
    const top = 28 + Math.ceil(Math.min(200, Math.max(20, ...keys.map((k) => textWidth(k))))) + 8;
    const width = Math.max(left + keys.length * cell + 8, Math.ceil(textWidth(title, TITLE_FONT)) + 16);
    const height = top + queries.length * cell + 8;
    const root = node("svg", { xmlns: SVG_NS, width, height, viewBox: `0 0 ${width} ${height}`,
      "font-family": "sans-serif", "font-size": 12 });
    root.append(node("title", {}, title),
      node("rect", { width, height, fill: "#ffffff" }),
      node("text", { class: "title", x: 8, y: 18, "font-size": 14, "font-weight": "bold" }, title));
    const cells = node("g", { class: "cells", transform: `translate(${left} ${top})` });
    matrix.forEach((row, i) => row.forEach((w, j) => {
      cells.append(node("rect", { x: j * cell, y: i * cell, width: cell, height: cell,
        fill: colour(i, j), "data-weight": w }));
    }));
    const qs = node("g", { class: "queries", "text-anchor": "end" });
    queries.forEach((q, i) => qs.append(node("text", { x: left - 4,
      y: top + (i + 0.5) * cell + 4 }, q)));
    const ks = node("g", { class: "keys" });
    keys.forEach((k, j) => {
      const x = left + (j + 0.5) * cell + 4;
      ks.append(node("text", { x, y: top - 4, transform: `rotate(-90 ${x} ${top - 4})` }, k));
    });
    root.append(cells, qs, ks);
    return serialised(root);
  }

  // An image view's map as SVG text: the image, one rect per region with its colour and
  // opacity, the title.
  function imageSvg(title, imageUrl, width, height, grid, colour, opacity) {
    const scale = Math.max(1, Math.floor(320 / Math.max(width, height)));
    const w = width * scale;
    const h = height * scale;
    const total = Math.max(w, Math.ceil(textWidth(title, TITLE_FONT))) + 16;
    const root = node("svg", { xmlns: SVG_NS, width: total, height: h + 36,
      viewBox: `0 0 ${total} ${h + 36}`, "font-family": "sans-serif" });
    root.append(node("title", {}, title), node("rect", { width: total, height: h + 36, fill: "#ffffff" }),
      node("text", { class: "title", x: 8, y: 18, "font-size": 14, "font-weight": "bold" }, title));
    const stage = node("g", { transform: "translate(8 28)" });
    if (String(imageUrl).startsWith("data:image/")) {
      stage.append(node("image", { href: imageUrl, width: w, height: h,
        preserveAspectRatio: "none", style: "image-rendering: pixelated" }));
    }
    const gh = grid.length;
    const gw = gh ? grid[0].length : 0;
    grid.forEach((row, r) => row.forEach((v, c) => {
      stage.append(node("rect", { x: (c * w) / gw, y: (r * h) / gh, width: w / gw, height: h / gh,
        fill: colour(r, c), "fill-opacity": opacity.toFixed(3), "data-weight": v }));
    }));
    root.append(stage);
    return serialised(root);
  }

  // A token matrix as a canvas: title, rotated key labels, query labels, and `heat` (a canvas
  // of one pixel per weight) enlarged to whole cells. Labels are left out (and the title says
  // so) when a cell is under 6 px.
  function matrixPng(title, queries, keys, heat) {
    const count = Math.max(queries.length, keys.length, 1);
    const cell = Math.max(1, Math.min(20, Math.floor(MAX_PNG_SIDE / count)));
    const labels = cell >= 6;
    const shownTitle = labels ? title : `${title} (token labels left out: too many to read)`;
    const left = labels ? Math.ceil(Math.min(200, Math.max(...queries.map((q) => textWidth(q))))) + 8 : 8;
    const top = 28 + (labels ? Math.ceil(Math.min(200, Math.max(...keys.map((k) => textWidth(k))))) + 8 : 0);
    const canvas = titled(shownTitle, left + keys.length * cell + 8, top + queries.length * cell + 8);
    const ctx = canvas.getContext("2d");
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(heat, left, top, keys.length * cell, queries.length * cell);
    if (labels) {
      ctx.font = FONT;
      ctx.textBaseline = "middle";
      ctx.textAlign = "right";
      queries.forEach((q, i) => ctx.fillText(q, left - 4, top + (i + 0.5) * cell, 200));
      ctx.textAlign = "left";
      keys.forEach((k, j) => {
        ctx.save();
        ctx.translate(left + (j + 0.5) * cell, top - 4);
        ctx.rotate(-Math.PI / 2);
        ctx.fillText(k, 0, 0, 200);
        ctx.restore();
      });
    }
    return canvas;
  }

  // A drawn canvas (an image view) under a title.
  function canvasPng(title, source) {
    const canvas = titled(title, source.width + 16, source.height + 36);
    canvas.getContext("2d").drawImage(source, 8, 28);
    return canvas;
  }

  // A white canvas at least width x height (wider if the title needs it), the title on top.
  function titled(title, width, height) {
    const canvas = document.createElement("canvas");
    canvas.width = Math.max(width, Math.ceil(textWidth(title, TITLE_FONT)) + 16);
    canvas.height = height;
    const ctx = canvas.getContext("2d");
    ctx.fillStyle = "#ffffff";
    ctx.fillRect(0, 0, canvas.width, canvas.height);
    ctx.fillStyle = "#222222";
    ctx.font = TITLE_FONT;
    ctx.fillText(title, 8, 18);
    return canvas;
  }

  function download(name, blob) {
    const url = URL.createObjectURL(blob);
    const link = document.createElement("a");
    link.href = url;
    link.download = name;
    link.hidden = true;
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  }

  function savePng(name, canvas) {
    canvas.toBlob((blob) => {
      if (blob) download(name, blob);
    }, "image/png");
  }

  function saveSvg(name, text) {
    download(name, new Blob([text], { type: "image/svg+xml" }));
  }

  // A file name from a view id and what is shown: letters, digits, '-' and '_' only.
  function fileName(...parts) {
    return parts.map((p) => String(p).replace(/[^A-Za-z0-9_-]+/g, "-")).join("-");
  }

  return { MAX_SVG_CELLS, hex, matrixSvg, imageSvg, matrixPng, canvasPng, savePng, saveSvg,
    fileName };
})();
