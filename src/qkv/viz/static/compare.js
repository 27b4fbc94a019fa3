// qkv attention page, compare mode (data.mode === "compare"; qkv/viz/compare.py makes the data):
// two results' token views side by side, A and B at the same layer and head (one selector
// drives both), and the signed difference B - A on a diverging scale centred at 0 (blue: B
// below A, red: B above A), its range symmetric: [-max |B - A|, +max |B - A|] of what is shown.
// Image views likewise: one map (group and map selectors) of A and of B over the image, on one
// min-max scale, and B - A over the image on the diverging scale.
// Defines one global, qkvCompare.page(app, data, kit); explorer.js calls it with its helpers
// (kit: el, header, heatImage, pixelImage, drawScaled, maxOf, colourTable, shown, fixed, cellSize,
// legend, overlayGrid, range, heat).
//
// Hooks for tests: #app[data-mode="compare"][data-state="done"]; .compare-output[data-side];
//   .compare-pair[data-view-id][data-layer][data-head] with .layer-select, .head-select;
//   canvas.compare-canvas[data-side="a"|"b"|"diff"] (Tk x Tq cells of data-cell px);
//   the diff canvas's data-max-abs (the largest |B - A| shown); .compare-unpaired
//   li[data-view-id] (a view not compared, and why). An image pair: .compare-pair[data-view-id]
//   [data-view-type="image"][data-group][data-map] with .group-select, .map-select, its canvases
//   canvas.compare-canvas[data-side] (the image's gh x gw cells; data-loaded once it is drawn).
const qkvCompare = (function () {
  "use strict";

  // ColorBrewer's RdBu, blue (negative) to red (positive), white at 0.
  const STOPS = ["#2166ac", "#4393c3", "#92c5de", "#d1e5f0", "#f7f7f7", "#fddbc7", "#f4a582",
    "#d6604d", "#b2182b"];

  function headMean(layer) {
    // layer: H x Tq x Tk -> Tq x Tk
    return layer[0].map((row, i) => row.map((_, j) => {
      let sum = 0;
      for (const head of layer) sum += head[i][j];
      return sum / layer.length;
    }));
  }

  function maxAbs(matrix) {
    let max = 0;
    for (const row of matrix) for (const d of row) if (Math.abs(d) > max) max = Math.abs(d);
    return max;
  }

  // The colour of difference d on the diverging scale from -max to +max (0 at its middle).
  function diverging(table, d, max) {
    const t = max > 0 ? (d / max + 1) / 2 : 0.5;
    const k = Math.max(0, Math.min(255, Math.round(t * 255))) * 3;
    return [table[k], table[k + 1], table[k + 2]];
  }

  // One pixel per cell, coloured by d / max on the diverging scale.
  function diffImage(kit, table, matrix, max) {
    return kit.pixelImage(matrix, (i, j) => diverging(table, matrix[i][j], max));
  }

  const ALPHA = 0.6; // of the maps over the image

  function imagePairView(kit, table, names, pair) {
    const { el } = kit;
    const groups = (pair.groups || []).filter((g) => Array.isArray(g.maps) && g.maps.length);
    const width = Number(pair.width) || 1;
    const height = Number(pair.height) || 1;
    const root = el("section", { class: "view panel compare-pair", "data-view-id": pair.id,
      "data-view-type": "image" });
    root.append(el("div", { class: "view-head" }, el("h2", { text: pair.title || pair.id }),
      el("span", { class: "view-meta", text: `${width} × ${height} pixels` })));
    if (!groups.length) {
      root.append(el("p", { class: "empty", text: "this view holds no maps" }));
      return root;
    }
    const groupSelect = el("select", { class: "group-select", "aria-label": "group" },
      groups.map((g, i) => el("option", { value: i, text: g.name })));
    const mapSelect = el("select", { class: "map-select", "aria-label": "map" });
    const readout = el("span", { class: "compare-range" });
    root.append(el("div", { class: "view-controls" }, el("label", {}, "group ", groupSelect),
      el("label", {}, "map ", mapSelect), readout));
    // The longer side drawn at about 240 px: three images side by side.
    const side = Math.max(width, height);
    const scale = side <= 240 ? Math.max(1, Math.floor(240 / side)) : 240 / side;
    const sides = [["a", names[0]], ["b", names[1]], ["diff", `${names[1]} − ${names[0]}`]];
    const canvases = {};
    root.append(el("div", { class: "compare-row" }, sides.map(([s, caption]) => {
      const canvas = el("canvas", { class: "image-canvas compare-canvas", "data-side": s,
        role: "img", "aria-label": `${caption}: attention over the image` });
      canvas.width = Math.round(width * scale);
      canvas.height = Math.round(height * scale);
      canvases[s] = canvas;
      return el("figure", { class: `compare-figure compare-${s}` },
        el("figcaption", {}, el("strong", { text: caption })), canvas);
    })));

    // Only the pair's own data: URL is drawn; anything else would be a network request.
    const image = new Image();
    let loaded = false;
    image.addEventListener("load", () => {
      loaded = true;
      draw();
      for (const c of Object.values(canvases)) c.dataset.loaded = "true";
    });
    const picture = String(pair.image || "");
    if (picture.startsWith("data:image/")) image.src = picture;

    function fillMaps() {
      const group = groups[Number(groupSelect.value)];
      mapSelect.replaceChildren(...group.maps.map((m, i) => el("option",
        { value: i, text: m.label })));
    }

    function draw() {
      const group = groups[Number(groupSelect.value)];
      const map = group.maps[Number(mapSelect.value)];
      const under = loaded ? image : null;
      // One scale for A and B, so that equal weights get equal colours.
      const [lowA, highA] = kit.range(map.a);
      const [lowB, highB] = kit.range(map.b);
      const low = Math.min(lowA, lowB);
      const high = Math.max(highA, highB);
      const heat = (w) => kit.heat(high > low ? (w - low) / (high - low) : 1);
      kit.overlayGrid(canvases.a, under, map.a, heat, ALPHA, false);
      kit.overlayGrid(canvases.b, under, map.b, heat, ALPHA, false);
      const max = maxAbs(map.diff);
      kit.overlayGrid(canvases.diff, under, map.diff, (d) => diverging(table, d, max), ALPHA,
        false);
      canvases.diff.dataset.maxAbs = max;
      readout.textContent = `${names[0]} and ${names[1]}: ${kit.fixed(low)} to ` +
        `${kit.fixed(high)} · max |${names[1]} − ${names[0]}| = ${kit.fixed(max)}`;
      root.dataset.group = group.name;
      root.dataset.map = map.label;
    }
    groupSelect.addEventListener("change", () => {
      fillMaps();
      draw();
    });
    mapSelect.addEventListener("change", draw);
    fillMaps();
    draw();
    return root;
  }

  function pairView(kit, table, names, pair) {
    const { el } = kit;
    const layers = { a: pair.a, b: pair.b, diff: pair.diff };
    const heads = pair.a.length ? pair.a[0].length : 0;
    const root = el("section", { class: "view panel compare-pair", "data-view-id": pair.id });
    root.append(el("div", { class: "view-head" }, el("h2", { text: pair.title || pair.id }),
      el("span", { class: "view-meta", text: `${pair.a.length} layers · ${heads} heads · ` +
        `${pair.queries.length} × ${pair.keys.length} tokens` })));
    if (!pair.a.length || !heads || !pair.queries.length || !pair.keys.length) {
      root.append(el("p", { class: "empty", text: "this view holds no weights" }));
      return root;
    }
    const layerSelect = el("select", { class: "layer-select", "aria-label": "layer" },
      pair.a.map((_, l) => el("option", { value: l, text: `layer ${l}` })));
    const headSelect = el("select", { class: "head-select", "aria-label": "head" },
      el("option", { value: "mean", text: "mean of heads" }),
      Array.from({ length: heads }, (_, h) => el("option", { value: h, text: `head ${h}` })));
    const readout = el("span", { class: "compare-range" });
    root.append(el("div", { class: "view-controls" }, el("label", {}, "layer ", layerSelect),
      el("label", {}, "head ", headSelect), readout));

    const cell = kit.cellSize(Math.max(pair.queries.length, pair.keys.length));
    const sides = [["a", names[0]], ["b", names[1]], ["diff", `${names[1]} − ${names[0]}`]];
    const canvases = {};
    const legends = {};
    const figures = sides.map(([side, caption]) => {
      const canvas = el("canvas", { class: "matrix-canvas compare-canvas", "data-side": side,
        "data-cell": cell, role: "img", "aria-label": `${caption}, ${pair.queries.length} ` +
        `queries by ${pair.keys.length} keys` });
      canvas.width = pair.keys.length * cell;
      canvas.height = pair.queries.length * cell;
      canvases[side] = canvas;
      legends[side] = el("span", { class: "legend-slot" });
      const matrix = el("div", { class: "matrix" }, el("div", { class: "corner" }),
        el("div", { class: "col-labels" }, pair.keys.map((k, j) => el("span", {
          class: "col-label", "data-k": j, title: `key ${j}: ${k}`, text: kit.shown(k) }))),
        el("div", { class: "row-labels" }, pair.queries.map((q, i) => el("span", {
          class: "row-label", "data-q": i, title: `query ${i}: ${q}`, text: kit.shown(q) }))),
        canvas);
      matrix.style.setProperty("--cell", `${cell}px`);
      matrix.style.setProperty("--label-size", `${Math.min(13, cell - 2)}px`);
      return el("figure", { class: `compare-figure compare-${side}` },
        el("figcaption", {}, el("strong", { text: caption }), " ", legends[side]),
        el("div", { class: "matrix-scroll" }, matrix));
    });
    root.append(el("div", { class: "compare-row" }, figures));

    function matrixOf(side, layer, head) {
      return head === "mean" ? headMean(layers[side][layer]) : layers[side][layer][head];
    }

    function draw() {
      const layer = Number(layerSelect.value);
      const head = headSelect.value === "mean" ? "mean" : Number(headSelect.value);
      // One scale for A and B, so that equal weights get equal colours.
      const a = matrixOf("a", layer, head);
      const b = matrixOf("b", layer, head);
      const high = Math.max(kit.maxOf(a), kit.maxOf(b));
      kit.drawScaled(canvases.a, kit.heatImage(a, high, false));
      kit.drawScaled(canvases.b, kit.heatImage(b, high, false));
      legends.a.replaceChildren(kit.legend(kit.fixed(high)));
      legends.b.replaceChildren(kit.legend(kit.fixed(high)));
      const diff = matrixOf("diff", layer, head);
      const max = maxAbs(diff);
      kit.drawScaled(canvases.diff, diffImage(kit, table, diff, max));
      canvases.diff.dataset.maxAbs = max;
      legends.diff.replaceChildren(el("span", { class: "legend diverging",
        title: "colour scale of B − A, symmetric about 0" },
        el("span", { class: "legend-low", text: `−${kit.fixed(max)}` }),
        el("span", { class: "legend-bar diverging-bar", "aria-hidden": "true" }),
        el("span", { class: "legend-high", text: `+${kit.fixed(max)}` })));
      readout.textContent = `max |${names[1]} − ${names[0]}| = ${kit.fixed(max)}`;
      root.dataset.layer = layer;
      root.dataset.head = head;
    }
    layerSelect.addEventListener("change", draw);
    headSelect.addEventListener("change", draw);
    draw();
    return root;
  }

  function page(app, data, kit) {
    const { el } = kit;
    const names = Array.isArray(data.names) ? data.names.map(String) : ["A", "B"];
    const table = kit.colourTable(STOPS);
    const outputs = Array.isArray(data.outputs) ? data.outputs : [];
    const pairs = Array.isArray(data.pairs) ? data.pairs : [];
    const unpaired = Array.isArray(data.unpaired) ? data.unpaired : [];
    document.title = `qkv attention: ${names[0]} vs ${names[1]}`;
    const layout = el("div", { class: "layout" });
    if (!data.inline) app.append(kit.header(`comparing ${names[0]} and ${names[1]}`));
    else app.dataset.inline = "true";
    app.append(layout);
    layout.append(el("section", { id: "output", class: "panel" }, names.map((name, k) =>
      el("p", { class: "compare-output", "data-side": k ? "b" : "a" }, el("strong",
        { text: `${name}: ` }), String((outputs[k] || {}).summary ?? "")))));
    if (unpaired.length) {
      layout.append(el("section", { class: "panel compare-unpaired" },
        el("p", { text: "Not compared:" }), el("ul", {}, unpaired.map((u) => el("li",
          { "data-view-id": u.id, text: `${u.title || u.id} (${u.id}): ${u.reason}` })))));
    }
    if (!pairs.length) {
      layout.append(el("p", { class: "no-views panel", text: "no views to compare" }));
    }
    layout.append(el("div", { id: "views" }, pairs.map((p) => (p.type === "image" ?
      imagePairView : pairView)(kit, table, names, p))));
    app.dataset.state = "done";
    if (data.inline) {
      const post = () => parent.postMessage({ qkvHeight: document.body.scrollHeight }, "*");
      post();
      new ResizeObserver(post).observe(document.body);
    }
  }

  return { page };
})();
