// qkv attention explorer: the page's script (plain JavaScript, no framework, no build step).
//
// It reads the page's data from <script id="qkv-data" type="application/json"> (see
// qkv/viz/page.py, which inlines export.js and modelview.js before this file): in "served"
// mode it offers the models and POSTs each input to data.api (a relative URL); in "static"
// mode (an exported page) it shows data.result and nothing else.
// Every text from the data is inserted with textContent or setAttribute, never as HTML, and the
// page loads nothing: no fonts, no images but the data: URLs of the result itself.
//
// With data.inline (a notebook's display, qkv/viz/notebook.py) a static page shows the result
// alone and posts its height to the notebook that holds it: {qkvHeight: pixels}.
// In "compare" mode the page is compare.js's (qkvCompare.page, given this file's helpers).
//
// Hooks for tests (stable ids, classes and data attributes):
//   #app[data-mode="served"|"static"][data-state="ready"|"running"|"done"|"error"]
//       [data-inline="true"] in a notebook's display.
//       data-result-model: the model whose result is shown.
//   #model-select, #text-input, #image-input, #new-tokens, #run-button, #char-count,
//   #image-preview, #extra-neuron, #extra-rollout (checkboxes, enabled for a model whose
//   "extras" names them; sent as "neuron"/"rollout" with the run): the run controls (served
//   mode only; absent from an exported page).
//   #error: the error line (empty when there is none). #output: the model's output, with
//       .summary, .prob-row[data-label] (.prob-fill, .prob-value) for classifiers,
//       .tag-pair (.tag-word, .tag-tag) for taggers. #views: the views; .no-views when none.
//   .view[data-view-id=ID][data-view-type="tokens"|"image"]: one panel per RESULT view.
//   Tokens views (.view[data-mode="matrix"|"heads"]):
//     .layer-select (values 0..L-1), .head-select (values "mean", 0..H-1),
//     .mode-matrix / .mode-heads buttons (aria-pressed), .scale-select ("matrix": colours
//     scaled to the largest weight shown, "row": to each row's largest),
//     .matrix[data-layer][data-head][data-max][data-scale]: the heatmap; canvas.matrix-canvas
//       (Tk x Tq cells), .row-label[data-q=i] (queries), .col-label[data-k=j] (keys),
//     .heads-view[data-layer][data-head]: the head view; .q-token[data-q=i], .k-token[data-k=j],
//       svg.heads-svg with g.q-lines[data-q=i] holding line[data-k=j][data-weight],
//     .head-thumb[data-head="mean"|h][aria-pressed]: the "all heads" strip of the current layer,
//     .mode-model: the model view (modelview.js): .model-grid[data-drawn] of
//       .model-thumb[data-layer][data-head] (canvas.model-canvas); a click shows it in the matrix.
//   Every view: .save-png, .save-svg buttons (export.js; .save-svg disabled, its title saying
//     why, for a matrix too large for SVG).
//     .readout: the line that names the hovered query and the weights of its keys.
//     Hovering a query (row label, matrix row, or a head-view token) sets data-highlight="query"
//     on it and data-highlight="key" on the keys it attends to (weight >= 1/5 of its row's
//     largest); data-weight on each key holds its weight.
//   .neuron-view (neuron.js, only in a view with query and key vectors): a click on a matrix
//     cell shows that query and key (in the layer shown; head 0 for the mean of heads).
//   Image views: .group-select (values: group index), .map-button[data-map=i][aria-pressed]
//     (hover previews a map, click selects it), canvas.image-canvas[data-group][data-map]
//     [data-loaded] (what is drawn: group name and map label; data-loaded="true" once the
//     image is drawn under the map), .overlay-opacity (range), .readout.
(function () {
  "use strict";

  const SVG_NS = "http://www.w3.org/2000/svg";
  const data = JSON.parse(document.getElementById("qkv-data").textContent);
  const app = document.getElementById("app");
  const limits = data.limits || {};
  const models = Array.isArray(data.models) ? data.models : [];

  // ------------------------------------------------------------------------------ helpers

  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    setProps(node, props);
    for (const child of children.flat()) {
      if (child !== null && child !== undefined && child !== false) node.append(child);
    }
    return node;
  }

  function svg(tag, props) {
    const node = document.createElementNS(SVG_NS, tag);
    setProps(node, props);
    return node;
  }

  function setProps(node, props) {
    for (const [key, value] of Object.entries(props || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (key === "text") node.textContent = String(value);
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value === true ? "" : String(value));
    }
  }

  // Tokens as shown: spaces and control characters made visible (the title keeps the raw text).
  function shown(token) {
    const text = String(token);
    if (text === "") return "∅";
    return text.replace(/ /g, "␣").replace(/\n/g, "↵").replace(/\t/g, "⇥").replace(/\r/g, "␍");
  }

  function fixed(weight) {
    return Number(weight).toFixed(3);
  }

  function maxOf(matrix) {
    let max = 0;
    for (const row of matrix) for (const w of row) if (w > max) max = w;
    return max > 0 ? max : 1;
  }

  function range(matrix) {
    let low = Infinity;
    let high = -Infinity;
    for (const row of matrix) {
      for (const w of row) {
        if (w < low) low = w;
        if (w > high) high = w;
      }
    }
    return low <= high ? [low, high] : [0, 0];
  }

  // A 256-entry colour table interpolated between colour stops ("#rrggbb").
  function colourTable(stops) {
    const rgb = stops.map((hex) => [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16)));
    const table = new Uint8ClampedArray(256 * 3);
    for (let i = 0; i < 256; i++) {
      const at = (i / 255) * (rgb.length - 1);
      const lo = Math.min(Math.floor(at), rgb.length - 2);
      const t = at - lo;
      for (let c = 0; c < 3; c++) table[i * 3 + c] = rgb[lo][c] * (1 - t) + rgb[lo + 1][c] * t;
    }
    return table;
  }

  // Sequential maps: ColorBrewer's Blues for the weights, an inferno-like one (black, purple,
  // orange, yellow) for the overlay on images.
  const BLUES = colourTable(["#f7fbff", "#deebf7", "#c6dbef", "#9ecae1", "#6baed6", "#4292c6",
    "#2171b5", "#08519c", "#08306b"]);
  const HEAT = colourTable(["#000004", "#320a5e", "#781c6d", "#bc3754", "#ed6925", "#fbb61a",
    "#fcffa4"]);

  function colourAt(table, value) {
    const i = Math.max(0, Math.min(255, Math.round(value * 255))) * 3;
    return [table[i], table[i + 1], table[i + 2]];
  }

  // An off-screen canvas of one pixel per cell of `matrix` (columns wide, rows high), the
  // colour of cell (i, j) given by `rgb(i, j)` as [r, g, b].
  function pixelImage(matrix, rgb) {
    const rows = matrix.length;
    const cols = rows ? matrix[0].length : 0;
    const canvas = document.createElement("canvas");
    canvas.width = Math.max(1, cols);
    canvas.height = Math.max(1, rows);
    const ctx = canvas.getContext("2d");
    const image = ctx.createImageData(canvas.width, canvas.height);
    for (let i = 0; i < rows; i++) {
      for (let j = 0; j < cols; j++) {
        const [r, g, b] = rgb(i, j);
        const at = (i * cols + j) * 4;
        image.data[at] = r;
        image.data[at + 1] = g;
        image.data[at + 2] = b;
        image.data[at + 3] = 255;
      }
    }
    ctx.putImageData(image, 0, 0);
    return canvas;
  }

  // One pixel per weight (Tk wide, Tq high), coloured by weight / max, or with `perRow`, by
  // weight / its row's largest weight.
  function heatImage(matrix, max, perRow) {
    const scales = matrix.map((row) => (perRow ? Math.max(...row) || 1 : max));
    return pixelImage(matrix, (i, j) => colourAt(BLUES, matrix[i][j] / scales[i]));
  }

  // Draw a small source canvas onto `canvas`: crisp blocks when enlarging, averaged when not.
  function drawScaled(canvas, source) {
    const ctx = canvas.getContext("2d");
    ctx.imageSmoothingEnabled = canvas.width < source.width || canvas.height < source.height;
    ctx.clearRect(0, 0, canvas.width, canvas.height);
    ctx.drawImage(source, 0, 0, canvas.width, canvas.height);
    return ctx;
  }

  function legend(high) {
    const bar = el("span", { class: "legend-bar", "aria-hidden": "true" });
    return el("span", { class: "legend", title: "colour scale of the weights shown" },
      el("span", { class: "legend-low", text: "0" }), bar,
      el("span", { class: "legend-high", text: high }));
  }

  function setPressed(buttons, chosen) {
    for (const button of buttons) button.setAttribute("aria-pressed", String(button === chosen));
  }

  // ------------------------------------------------------------------------- tokens views

  // A long view (more than LONG tokens on a side) is drawn small, about 1,000 px across, with
  // no label elements (the readout names the hovered query and key) and no head view: 1,000
  // labels re-laid-out on each hover, and 30,000 lines, would make the page crawl.
  const LONG = 256;

  function cellSize(count) {
    if (count <= 12) return 30;
    if (count <= 24) return 22;
    if (count <= 48) return 16;
    if (count <= LONG) return 12;
    return Math.max(1, Math.floor(1000 / count));
  }

  // A self-attention view's marks (view.marks: a label per token, "" for none; an entity type,
  // a tag), or null; `types`: the result's type order (output.types), for the colours.
  function viewMarks(view, types) {
    const marks = view.marks;
    const n = (view.queries || []).length;
    if (!Array.isArray(marks) || marks.length !== n || (view.keys || []).length !== n) return null;
    const found = [...new Set(marks.map(String).filter(Boolean))].sort();
    const order = Array.isArray(types) ? types.map(String) : [];
    return { marks: marks.map(String), types: [...order, ...found.filter((t) => !order.includes(t))] };
  }

  // A token's label with its mark after it ("Paul [person]"), as the saved figures write it.
  function markedLabel(token, mark) {
    return mark ? `${shown(token)} [${mark}]` : shown(token);
  }

  // The props of a token's label: its mark (data-mark, its colour in --mark, named in the title).
  function markProps(marked, index, title) {
    const mark = marked ? marked.marks[index] : "";
    return mark ? { "data-mark": mark, title: `${title} · ${mark}`,
      style: `--mark: ${entityColour(marked.types, mark)}` } : { title };
  }

  // The legend of the marks' colours: one swatch and name per type the view's tokens carry.
  function markLegend(marked) {
    const present = new Set(marked.marks.filter(Boolean));
    const shownTypes = marked.types.filter((t) => present.has(t));
    return el("div", { class: "mark-legend", "aria-label": "token marks" },
      el("span", { class: "muted", text: shownTypes.length ? "marks " : "no token marked" }),
      shownTypes.map((type) => {
        const swatch = el("span", { class: "entity-swatch" });
        swatch.style.background = entityColour(marked.types, type);
        return el("span", { class: "mark-key", "data-mark": type }, swatch,
          el("span", { text: type }));
      }));
  }

  function tokensView(view, types) {
    const layers = Array.isArray(view.layers) ? view.layers : [];
    const queries = view.queries || [];
    const keys = view.keys || [];
    const tokenMarks = viewMarks(view, types);
    const heads = layers.length ? layers[0].length : 0;
    const root = el("section", { class: "view panel", "data-view-id": view.id,
      "data-view-type": "tokens", "data-mode": "matrix" });
    const meta = `${layers.length} layer${layers.length === 1 ? "" : "s"} · ${heads} head` +
      `${heads === 1 ? "" : "s"} · ${queries.length} × ${keys.length} tokens`;
    root.append(el("div", { class: "view-head" }, el("h2", { text: view.title || view.id }),
      el("span", { class: "view-meta", text: meta })));
    if (!layers.length || !heads || !queries.length || !keys.length) {
      root.append(el("p", { class: "empty", text: "this view holds no weights" }));
      return root;
    }

    const state = { layer: 0, head: "mean", focus: null, perRow: false };
    const long = Math.max(queries.length, keys.length) > LONG;
    const means = new Map();
    // The heat image and largest weight of (layer, head, scale), made once: a hover only
    // redraws the image.
    const heats = new Map();
    function heatOf(layer, head) {
      const key = `${layer}/${head}/${state.perRow}`;
      if (!heats.has(key)) {
        const m = weights(layer, head);
        const max = maxOf(m);
        heats.set(key, { image: heatImage(m, max, state.perRow), max });
      }
      return heats.get(key);
    }
    function weights(layer, head) {
      if (head !== "mean") return layers[layer][head];
      if (!means.has(layer)) {
        const mean = queries.map((_, i) => keys.map((__, j) => {
          let sum = 0;
          for (let h = 0; h < heads; h++) sum += layers[layer][h][i][j];
          return sum / heads;
        }));
        means.set(layer, mean);
      }
      return means.get(layer);
    }
    const headName = (head) => (head === "mean" ? "mean of heads" : `head ${head}`);

    // Controls: layer, head, display mode, colour scale.
    const layerSelect = el("select", { class: "layer-select", "aria-label": "layer" },
      layers.map((_, l) => el("option", { value: l, text: `layer ${l}` })));
    const headSelect = el("select", { class: "head-select", "aria-label": "head" },
      el("option", { value: "mean", text: "mean of heads" }),
      Array.from({ length: heads }, (_, h) => el("option", { value: h, text: `head ${h}` })));
    const matrixButton = el("button", { type: "button", class: "mode-matrix",
      "aria-pressed": "true", text: "matrix" });
    const headsButton = el("button", { type: "button", class: "mode-heads",
      "aria-pressed": "false", text: "head view", disabled: long,
      title: long ? `too long for the head view (more than ${LONG} tokens)` : null });
    const modelButton = el("button", { type: "button", class: "mode-model",
      "aria-pressed": "false", text: "model view", title: "every layer and head" });
    const tooLong = queries.length * keys.length > qkvExport.MAX_SVG_CELLS;
    const pngButton = el("button", { type: "button", class: "save-png", text: "PNG",
      title: "save the matrix shown (layer and head) as a PNG image" });
    const svgButton = el("button", { type: "button", class: "save-svg", text: "SVG",
      disabled: tooLong, title: tooLong ? `too long for SVG (${queries.length} × ` +
        `${keys.length} cells, at most ${qkvExport.MAX_SVG_CELLS}): save the PNG`
        : "save the matrix shown (layer and head) as an SVG drawing" });
    const scaleSelect = el("select", { class: "scale-select", "aria-label": "colour scale" },
      el("option", { value: "matrix", text: "matrix max" }),
      el("option", { value: "row", text: "row max" }));
    const legendSlot = el("span", { class: "legend-slot" });
    root.append(el("div", { class: "view-controls" },
      el("label", {}, "layer ", layerSelect), el("label", {}, "head ", headSelect),
      el("span", { class: "segmented", role: "group", "aria-label": "display" },
        matrixButton, headsButton, modelButton),
      el("label", {}, "colours ", scaleSelect), legendSlot,
      el("span", { class: "save", role: "group", "aria-label": "save" }, "save ", pngButton,
        svgButton)));

    // The "all heads" strip: the mean and every head of the current layer.
    const thumbs = ["mean", ...Array.from({ length: heads }, (_, h) => h)].map((head) => {
      const aspect = keys.length / queries.length;
      const canvas = el("canvas", { class: "thumb-canvas" });
      canvas.width = Math.round(aspect >= 1 ? 64 : 64 * aspect) || 1;
      canvas.height = Math.round(aspect >= 1 ? 64 / aspect : 64) || 1;
      const button = el("button", { type: "button", class: "head-thumb", "data-head": head,
        "aria-pressed": "false", title: `show ${headName(head)}` }, canvas,
        el("span", { text: head === "mean" ? "mean" : `head ${head}` }));
      button.addEventListener("click", () => choose(state.layer, head));
      return { head, button, canvas };
    });
    root.append(el("div", { class: "head-strip", role: "group",
      "aria-label": "all heads of this layer" }, thumbs.map((t) => t.button)));

    const readout = el("p", { class: "readout", "aria-live": "polite",
      text: "hover a query token (a row) to see the keys it attends to" });
    if (tokenMarks) root.append(markLegend(tokenMarks));
    root.append(readout);

    // Labels with their marks, for the readout and the saved PNG and SVG ("Paul [person]").
    const queryLabels = queries.map((q, i) => markedLabel(q, tokenMarks && tokenMarks.marks[i]));
    const keyLabels = keys.map((k, j) => markedLabel(k, tokenMarks && tokenMarks.marks[j]));
    // Matrix: row labels (queries), column labels (keys), one canvas of Tq x Tk cells.
    const cell = cellSize(Math.max(queries.length, keys.length));
    const canvas = el("canvas", { class: "matrix-canvas", role: "img",
      "aria-label": `attention weights, ${queries.length} queries by ${keys.length} keys` });
    canvas.width = keys.length * cell;
    canvas.height = queries.length * cell;
    const rowLabels = long ? [] : queries.map((q, i) => el("span", { class: "row-label", "data-q": i,
      text: shown(q), ...markProps(tokenMarks, i, `query ${i}: ${q}`) }));
    const colLabels = long ? [] : keys.map((k, j) => el("span", { class: "col-label", "data-k": j,
      text: shown(k), ...markProps(tokenMarks, j, `key ${j}: ${k}`) }));
    const matrix = el("div", { class: "matrix", tabindex: 0,
      "aria-label": "attention matrix; arrow keys move between query rows" },
      el("div", { class: "corner" },
        el("span", { class: "axis-keys", text: view.self ? "keys →" : "source →" }),
        el("span", { class: "axis-queries", text: view.self ? "queries ↓" : "target ↓" })),
      el("div", { class: "col-labels" }, colLabels),
      el("div", { class: "row-labels" }, rowLabels),
      canvas);
    matrix.style.setProperty("--cell", `${cell}px`);
    matrix.style.setProperty("--label-size", `${Math.min(13, cell - 2)}px`);
    const matrixPane = el("div", { class: "matrix-scroll" }, matrix);

    // Head view: queries left, keys right, one line per weight (the strongest of each row).
    const ROW = Math.max(queries.length, keys.length) <= 16 ? 24 : 20;
    const WIDTH = 260;
    const height = Math.max(queries.length, keys.length) * ROW;
    const qTokens = long ? [] : queries.map((q, i) => el("span", { class: "q-token", "data-q": i,
      tabindex: 0, text: shown(q), ...markProps(tokenMarks, i, `query ${i}: ${q}`) }));
    const kTokens = long ? [] : keys.map((k, j) => el("span", { class: "k-token", "data-k": j,
      text: shown(k), ...markProps(tokenMarks, j, `key ${j}: ${k}`) }));
    const lines = svg("svg", { class: "heads-svg", width: WIDTH, height,
      viewBox: `0 0 ${WIDTH} ${height}`, "aria-hidden": "true" });
    const headsView = el("div", { class: "heads-view" },
      el("div", { class: "q-col" }, qTokens), lines, el("div", { class: "k-col" }, kTokens));
    headsView.style.setProperty("--row", `${ROW}px`);
    const headsPane = el("div", { class: "heads-scroll", hidden: true }, headsView);
    // Model view: every layer and head; a click shows that one in the matrix.
    const model = qkvModelView.modelGrid(layers, queries, keys,
      (m) => heatImage(m, maxOf(m), state.perRow), (l, h) => {
        choose(l, h);
        setMode("matrix");
      });
    const modelPane = el("div", { class: "model-scroll", hidden: true }, model.root);
    root.append(matrixPane, headsPane, modelPane);

    function drawLines(m, max) {
      lines.replaceChildren();
      if (long) return;
      lines.classList.remove("focused");
      m.forEach((row, i) => {
        const group = svg("g", { class: "q-lines", "data-q": i });
        const scale = state.perRow ? Math.max(...row) || 1 : max;
        const strongest = row.map((w, j) => [w, j]).filter(([w]) => w >= 0.01 * scale)
          .sort((a, b) => b[0] - a[0]).slice(0, 32);
        for (const [w, j] of strongest) {
          const share = w / scale;
          group.append(svg("line", { x1: 2, y1: (i + 0.5) * ROW, x2: WIDTH - 2,
            y2: (j + 0.5) * ROW, "data-k": j, "data-weight": w,
            "stroke-opacity": (0.08 + 0.92 * share).toFixed(3),
            "stroke-width": (0.5 + 3 * share).toFixed(2) }));
        }
        lines.append(group);
      });
    }

    function draw() {
      const { image, max } = heatOf(state.layer, state.head);
      const ctx = drawScaled(canvas, image);
      if (state.focus !== null) {
        const y = state.focus * cell;
        ctx.fillStyle = "rgba(255, 255, 255, 0.65)";
        ctx.fillRect(0, 0, canvas.width, y);
        ctx.fillRect(0, y + cell, canvas.width, canvas.height - y - cell);
        ctx.strokeStyle = "#e6550d";
        ctx.lineWidth = 2;
        ctx.strokeRect(1, y + 1, canvas.width - 2, cell - 2);
      }
      matrix.dataset.layer = state.layer;
      matrix.dataset.head = state.head;
      matrix.dataset.max = max;
      headsView.dataset.layer = state.layer;
      headsView.dataset.head = state.head;
      matrix.dataset.scale = state.perRow ? "row" : "matrix";
      legendSlot.replaceChildren(legend(state.perRow ? "row max" : fixed(max)));
    }

    function drawThumbs() {
      for (const thumb of thumbs) {
        drawScaled(thumb.canvas, heatOf(state.layer, thumb.head).image);
        thumb.button.setAttribute("aria-pressed", String(thumb.head === state.head));
      }
    }

    function choose(layer, head, redrawThumbs) {
      const newLayer = layer !== state.layer || redrawThumbs;
      state.layer = layer;
      state.head = head;
      layerSelect.value = String(layer);
      headSelect.value = String(head);
      if (newLayer) drawThumbs();
      for (const thumb of thumbs) {
        thumb.button.setAttribute("aria-pressed", String(thumb.head === head));
      }
      if (!long) drawLines(weights(layer, head), heatOf(layer, head).max);
      focus(state.focus, null); // redraws the matrix, keeping the hovered row
    }

    // Highlight query `i` (or none) and the keys it attends to; `j`: the hovered cell's key.
    let marked = [];
    function focus(i, j) {
      for (const node of marked) {
        node.removeAttribute("data-highlight");
        node.removeAttribute("data-weight");
        node.style.removeProperty("--w");
      }
      marked = [];
      state.focus = i;
      for (const g of lines.querySelectorAll("g.on")) g.classList.remove("on");
      lines.classList.toggle("focused", i !== null);
      if (i === null) {
        readout.textContent = "hover a query token (a row) to see the keys it attends to";
        draw();
        return;
      }
      const row = weights(state.layer, state.head)[i];
      const rowMax = Math.max(...row) || 1;
      for (const node of long ? [] : [rowLabels[i], qTokens[i]]) {
        node.dataset.highlight = "query";
        marked.push(node);
      }
      if (!long) row.forEach((w, k) => {
        for (const node of [colLabels[k], kTokens[k]]) {
          node.dataset.weight = w;
          node.style.setProperty("--w", (w / rowMax).toFixed(3));
          if (w > 0 && w >= 0.2 * rowMax) node.dataset.highlight = "key";
          marked.push(node);
        }
      });
      const group = lines.querySelector(`g[data-q="${i}"]`);
      if (group) group.classList.add("on");
      const top = row.map((w, k) => [w, k]).sort((a, b) => b[0] - a[0]).slice(0, 5)
        .map(([w, k]) => `${keyLabels[k]} ${fixed(w)}`).join(", ");
      let text = `${view.self ? "query" : "target"} ${i} “${queryLabels[i]}” ` +
        `(${headName(state.head)}, layer ${state.layer}) attends to: ${top}`;
      if (j !== null && j >= 0 && j < keys.length) {
        text += ` · “${keyLabels[j]}” (${view.self ? "key" : "source"} ${j}): ${fixed(row[j])}`;
      }
      readout.textContent = text;
      draw();
    }

    layerSelect.addEventListener("change", () => choose(Number(layerSelect.value), state.head));
    headSelect.addEventListener("change", () => choose(state.layer,
      headSelect.value === "mean" ? "mean" : Number(headSelect.value)));
    scaleSelect.addEventListener("change", () => {
      state.perRow = scaleSelect.value === "row";
      choose(state.layer, state.head, true);
      if (!modelPane.hidden) model.draw(true);
    });
    function setMode(mode) {
      root.dataset.mode = mode;
      matrixPane.hidden = mode !== "matrix";
      headsPane.hidden = mode !== "heads";
      modelPane.hidden = mode !== "model";
      if (mode === "model") model.draw(true);
      const pressed = { matrix: matrixButton, heads: headsButton, model: modelButton }[mode];
      setPressed([matrixButton, headsButton, modelButton], pressed);
      focus(null, null);
    }
    matrixButton.addEventListener("click", () => setMode("matrix"));
    headsButton.addEventListener("click", () => setMode("heads"));
    modelButton.addEventListener("click", () => setMode("model"));

    // Export: the matrix of the layer and head shown, with its labels and a title naming them.
    function exportTitle() {
      return `${view.title || view.id} · layer ${state.layer} · ${headName(state.head)}`;
    }
    function exportName(extension) {
      return `${qkvExport.fileName(view.id, "layer", state.layer, state.head === "mean"
        ? "mean" : `head-${state.head}`)}.${extension}`;
    }
    pngButton.addEventListener("click", () => {
      const m = weights(state.layer, state.head);
      const heat = heatImage(m, maxOf(m), state.perRow);
      qkvExport.savePng(exportName("png"), qkvExport.matrixPng(exportTitle(),
        queryLabels, keyLabels, heat));
    });
    svgButton.addEventListener("click", () => {
      const m = weights(state.layer, state.head);
      const max = maxOf(m);
      const rowMax = m.map((row) => Math.max(...row) || 1);
      const text = qkvExport.matrixSvg(exportTitle(), queryLabels, keyLabels, m,
        (i, j) => qkvExport.hex(colourAt(BLUES, m[i][j] / (state.perRow ? rowMax[i] : max))));
      if (text !== null) qkvExport.saveSvg(exportName("svg"), text);
    });

    function cellAt(event) {
      const box = canvas.getBoundingClientRect();
      const i = Math.floor(((event.clientY - box.top) / box.height) * queries.length);
      const j = Math.floor(((event.clientX - box.left) / box.width) * keys.length);
      return [Math.max(0, Math.min(queries.length - 1, i)), Math.max(0, Math.min(keys.length - 1, j))];
    }
    canvas.addEventListener("mousemove", (event) => {
      const [i, j] = cellAt(event);
      focus(i, j);
    });
    rowLabels.forEach((label, i) => label.addEventListener("mouseenter", () => focus(i, null)));
    matrix.addEventListener("mouseleave", () => focus(null, null));
    matrix.addEventListener("keydown", (event) => {
      const last = queries.length - 1;
      const now = state.focus;
      let next;
      if (event.key === "ArrowDown") next = now === null ? 0 : Math.min(last, now + 1);
      else if (event.key === "ArrowUp") next = now === null ? last : Math.max(0, now - 1);
      else if (event.key === "Escape") next = null;
      else return;
      event.preventDefault();
      focus(next, null);
      if (next !== null && !long) rowLabels[next].scrollIntoView({ block: "nearest" });
    });
    qTokens.forEach((token, i) => {
      token.addEventListener("mouseenter", () => focus(i, null));
      token.addEventListener("focus", () => focus(i, null));
    });
    headsView.addEventListener("mouseleave", () => focus(null, null));

    drawThumbs();
    choose(0, "mean");
    if (view.neuron) {  // neuron.js: q, k and q * k of a clicked cell's query and key
      const neuron = qkvNeuron.panel(view, shown);
      root.append(neuron.node);
      canvas.addEventListener("click", (event) => {
        const [i, j] = cellAt(event);
        neuron.show(state.layer, state.head === "mean" ? 0 : state.head, i, j);
      });
    }
    return root;
  }

  // -------------------------------------------------------------------------- image views

  // `target` filled with `image` (black until it has loaded: null) under a grid of equal cells,
  // cell (r, c) coloured `rgb(grid[r][c])` ([r, g, b]) at opacity `alpha`; `lines` outlines them.
  function overlayGrid(target, image, grid, rgb, alpha, lines) {
    const ctx = target.getContext("2d");
    ctx.imageSmoothingEnabled = false;
    ctx.fillStyle = "#000";
    ctx.fillRect(0, 0, target.width, target.height);
    if (image) ctx.drawImage(image, 0, 0, target.width, target.height);
    const gh = grid.length;
    const gw = gh ? grid[0].length : 0;
    for (let r = 0; r < gh; r++) {
      for (let c = 0; c < gw; c++) {
        const x0 = Math.round((c * target.width) / gw);
        const x1 = Math.round(((c + 1) * target.width) / gw);
        const y0 = Math.round((r * target.height) / gh);
        const y1 = Math.round(((r + 1) * target.height) / gh);
        const [red, green, blue] = rgb(grid[r][c]);
        ctx.fillStyle = `rgba(${red}, ${green}, ${blue}, ${alpha.toFixed(3)})`;
        ctx.fillRect(x0, y0, x1 - x0, y1 - y0);
        if (lines) {
          ctx.strokeStyle = "rgba(255, 255, 255, 0.25)";
          ctx.lineWidth = 1;
          ctx.strokeRect(x0 + 0.5, y0 + 0.5, x1 - x0 - 1, y1 - y0 - 1);
        }
      }
    }
  }

  const IMAGE_HINT = "hover the image to read a region's weight (colours: this map's lowest " +
    "to highest weight)";

  function imageView(view) {
    const groups = (view.groups || []).filter((g) => Array.isArray(g.maps) && g.maps.length);
    const root = el("section", { class: "view panel", "data-view-id": view.id,
      "data-view-type": "image" });
    const width = Number(view.width) || 1;
    const height = Number(view.height) || 1;
    root.append(el("div", { class: "view-head" }, el("h2", { text: view.title || view.id }),
      el("span", { class: "view-meta", text: `${width} × ${height} pixels` })));
    if (!groups.length) {
      root.append(el("p", { class: "empty", text: "this view holds no maps" }));
      return root;
    }
    const state = { group: 0, map: 0, shown: 0, hover: null };

    const groupSelect = el("select", { class: "group-select", "aria-label": "group" },
      groups.map((g, i) => el("option", { value: i, text: g.name })));
    const opacity = el("input", { type: "range", class: "overlay-opacity", min: 0, max: 100,
      value: 55, "aria-label": "overlay opacity" });
    const pngButton = el("button", { type: "button", class: "save-png", text: "PNG",
      title: "save the map shown over the image as a PNG image" });
    const svgButton = el("button", { type: "button", class: "save-svg", text: "SVG",
      title: "save the map shown over the image as an SVG drawing" });
    root.append(el("div", { class: "view-controls" },
      el("label", {}, groups.length > 1 ? "group " : "maps ", groupSelect),
      el("label", {}, "overlay ", opacity),
      el("span", { class: "save", role: "group", "aria-label": "save" }, "save ", pngButton,
        svgButton)));
    if (groups.length === 1) groupSelect.disabled = true;

    const mapButtons = el("div", { class: "map-buttons", role: "group", "aria-label": "maps" });
    // The longer side drawn at about 320 px, or 640 px for a strip (a caption's row of tiles).
    const side = Math.max(width, height);
    const target = side > 2 * Math.min(width, height) ? 640 : 320;
    const scale = side <= target ? Math.max(1, Math.floor(target / side)) : target / side;
    const canvas = el("canvas", { class: "image-canvas", role: "img" });
    canvas.width = Math.round(width * scale);
    canvas.height = Math.round(height * scale);
    const readout = el("p", { class: "readout", "aria-live": "polite",
      text: IMAGE_HINT });
    readout.style.maxWidth = `${Math.max(240, canvas.width)}px`;
    root.append(el("div", { class: "image-layout" },
      el("div", { class: "image-stage" }, canvas, readout), mapButtons));

    // Only the result's own data: URL is drawn; anything else would be a network request.
    const image = new Image();
    const picture = String(view.image || "");
    let loaded = false;
    image.addEventListener("load", () => {
      loaded = true;
      canvas.dataset.loaded = "true";
      drawAll();
    });
    if (picture.startsWith("data:image/")) image.src = picture;

    function paint(target, grid, alpha, lines) {
      // Min-max scaled: a map's weights often differ little, and it is their order that shows.
      const [low, high] = range(grid);
      overlayGrid(target, loaded ? image : null, grid,
        (w) => colourAt(HEAT, high > low ? (w - low) / (high - low) : 1), alpha, lines);
    }

    let buttons = [];
    function buildButtons() {
      const group = groups[state.group];
      buttons = group.maps.map((map, i) => {
        const thumb = el("canvas", { class: "map-thumb" });
        thumb.width = Math.max(8, Math.round((56 * width) / Math.max(width, height)));
        thumb.height = Math.max(8, Math.round((56 * height) / Math.max(width, height)));
        const button = el("button", { type: "button", class: "map-button", "data-map": i,
          "aria-pressed": String(i === state.map), title: map.label },
        thumb, el("span", { text: map.label }));
        button.addEventListener("click", () => {
          state.map = i;
          setPressed(buttons.map((b) => b.button), button);
          show(i);
        });
        button.addEventListener("mouseenter", () => show(i));
        button.addEventListener("focus", () => show(i));
        button.addEventListener("mouseleave", () => show(state.map));
        button.addEventListener("blur", () => show(state.map));
        return { button, thumb, map };
      });
      mapButtons.replaceChildren(...buttons.map((b) => b.button));
    }

    function show(i) {
      const group = groups[state.group];
      state.shown = i;
      const map = group.maps[i];
      paint(canvas, map.grid, Number(opacity.value) / 100, true);
      canvas.dataset.group = group.name;
      canvas.dataset.map = map.label;
      canvas.setAttribute("aria-label", `${group.name}, ${map.label}: attention over the image`);
    }

    function drawAll() {
      for (const b of buttons) paint(b.thumb, b.map.grid, 0.55, false);
      show(state.shown);
    }

    groupSelect.addEventListener("change", () => {
      state.group = Number(groupSelect.value);
      state.map = 0;
      state.shown = 0;
      buildButtons();
      drawAll();
    });
    opacity.addEventListener("input", () => show(state.shown));
    canvas.addEventListener("mousemove", (event) => {
      const grid = groups[state.group].maps[state.shown].grid;
      const box = canvas.getBoundingClientRect();
      const r = Math.min(grid.length - 1, Math.floor(((event.clientY - box.top) / box.height) * grid.length));
      const c = Math.min(grid[0].length - 1,
        Math.floor(((event.clientX - box.left) / box.width) * grid[0].length));
      if (r >= 0 && c >= 0) {
        const [low, high] = range(grid);
        readout.textContent = `region (row ${r}, column ${c}): ${fixed(grid[r][c])}` +
          ` (this map: ${fixed(low)} to ${fixed(high)})`;
      }
    });
    canvas.addEventListener("mouseleave", () => {
      readout.textContent = IMAGE_HINT;
    });

    // Export: the map shown (its group and label in the title) over the image.
    function exportTitle() {
      const group = groups[state.group];
      return `${view.title || view.id} · ${group.name} · ${group.maps[state.shown].label}`;
    }
    function exportName(extension) {
      const group = groups[state.group];
      return `${qkvExport.fileName(view.id, group.name, group.maps[state.shown].label)}.` +
        extension;
    }
    pngButton.addEventListener("click", () => {
      qkvExport.savePng(exportName("png"), qkvExport.canvasPng(exportTitle(), canvas));
    });
    svgButton.addEventListener("click", () => {
      const grid = groups[state.group].maps[state.shown].grid;
      const [low, high] = range(grid);
      const colour = (r, c) => qkvExport.hex(colourAt(HEAT,
        high > low ? (grid[r][c] - low) / (high - low) : 1));
      qkvExport.saveSvg(exportName("svg"), qkvExport.imageSvg(exportTitle(), picture, width,
        height, grid, colour, Number(opacity.value) / 100));
    });

    buildButtons();
    drawAll();
    return root;
  }

  // ------------------------------------------------------------------------------- output

  function modelLabel(name, kind) {
    const found = models.find((m) => m.name === name);
    return found ? found.label : String(kind || "").replace(/_/g, " ");
  }

  // Ten colours that stay apart on white (a colour per entity type, in the model's type order).
  const ENTITY_COLOURS = ["#fdd0a2", "#c6dbef", "#c7e9c0", "#dadaeb", "#fcbba1", "#fee391",
    "#d9f0d3", "#f2d7ee", "#d0d1e6", "#e5d8bd"];

  function entityColour(types, type) {
    const index = Math.max(0, types.indexOf(type));
    return ENTITY_COLOURS[index % ENTITY_COLOURS.length];
  }

  // The tagged text with each entity marked in its type's colour, and a legend of the types.
  function entityText(output) {
    const types = Array.isArray(output.types) ? output.types.map(String) : [];
    const words = output.tags.map(([word]) => String(word));
    const pieces = [];
    let at = 0;
    for (const entity of output.entities) {
      const start = Number(entity.start), end = Number(entity.end);
      if (!(start >= at && end > start && end <= words.length)) continue;
      if (start > at) pieces.push(document.createTextNode(`${words.slice(at, start).join(" ")} `));
      const mark = el("mark", { class: "entity", "data-type": String(entity.type),
        title: String(entity.type) }, el("span", { text: words.slice(start, end).join(" ") }),
        el("span", { class: "entity-type", text: String(entity.type) }));
      mark.style.background = entityColour(types, String(entity.type));
      pieces.push(mark, document.createTextNode(" "));
      at = end;
    }
    if (at < words.length) pieces.push(document.createTextNode(words.slice(at).join(" ")));
    const legend = el("div", { class: "entity-legend" }, types.map((type) => {
      const swatch = el("span", { class: "entity-swatch" });
      swatch.style.background = entityColour(types, type);
      return el("span", { class: "entity-key" }, swatch, el("span", { text: type }));
    }));
    const count = output.entities.length;
    return el("div", { class: "entities" },
      el("p", { class: "entity-text" }, pieces),
      el("p", { class: "muted", text: `${count} entit${count === 1 ? "y" : "ies"} found` }),
      legend);
  }

  function renderOutput(result) {
    const output = result.output || {};
    const parts = [el("div", { class: "output-head" },
      el("h2", { text: "output" }),
      result.model ? el("span", { class: "badge",
        text: `${result.model} · ${modelLabel(result.model, result.kind)}` }) : null)];
    const input = result.input || {};
    if (typeof input.text === "string") {
      parts.push(el("p", { class: "input-echo" }, el("span", { class: "muted", text: "input " }),
        el("span", { class: "text-value", text: input.text })));
    } else if (input.image) {
      parts.push(el("p", { class: "input-echo" }, el("span", { class: "muted", text: "input " }),
        el("span", { text: `${input.image.name} (${input.image.width} × ${input.image.height})` })));
    }
    const summary = el("p", { class: "summary" });
    if (result.kind === "language_model" && typeof output.prompt === "string") {
      summary.append(el("span", { class: "prompt", text: output.prompt }),
        el("span", { class: "continuation", title: "generated", text: output.text || "" }));
    } else {
      summary.textContent = String(output.summary ?? "");
    }
    parts.push(summary);
    if (output.probabilities && typeof output.probabilities === "object") {
      const entries = Object.entries(output.probabilities).sort((a, b) => b[1] - a[1]).slice(0, 10);
      parts.push(el("div", { class: "probs" }, entries.map(([label, p]) => {
        const fill = el("span", { class: "prob-fill" });
        fill.style.width = `${(Math.max(0, Math.min(1, Number(p))) * 100).toFixed(1)}%`;
        return el("div", { class: "prob-row", "data-label": label },
          el("span", { class: "prob-label", text: label }),
          el("span", { class: "prob-bar" }, fill),
          el("span", { class: "prob-value", text: Number(p).toFixed(3) }));
      })));
    }
    if (Array.isArray(output.entities) && Array.isArray(output.tags)) {
      parts.push(entityText(output));
    }
    if (Array.isArray(output.tags)) {
      parts.push(el("div", { class: "tags" }, output.tags.map(([word, tag]) =>
        el("span", { class: "tag-pair" }, el("span", { class: "tag-word", text: word }),
          el("span", { class: "tag-tag", text: tag })))));
    }
    outputBox.replaceChildren(...parts);
    outputBox.hidden = false;
  }

  function renderViews(result) {
    const views = Array.isArray(result.views) ? result.views : [];
    const types = (result.output || {}).types; // an entity tagger's types: the marks' colours
    if (!views.length) {
      viewsBox.replaceChildren(el("p", { class: "no-views panel",
        text: "this model has no attention to show" }));
      return;
    }
    viewsBox.replaceChildren(...views.map((view) => {
      if (view.type === "tokens") {
        return qkvWords.panel(view, (shownView) => tokensView(shownView, types)); // words.js
      }
      if (view.type === "image") return imageView(view);
      return el("section", { class: "view panel", "data-view-id": view.id },
        el("p", { class: "empty", text: `a view of unknown type “${view.type}”` }));
    }));
  }

  function renderResult(result) {
    renderOutput(result);
    renderViews(result);
    app.dataset.resultModel = result.model;
    app.dataset.state = "done";
  }

  // --------------------------------------------------------------------------------- page

  const errorLine = el("p", { id: "error", role: "alert" });
  const outputBox = el("section", { id: "output", class: "panel", "aria-live": "polite",
    hidden: true });
  const viewsBox = el("div", { id: "views" });

  function showError(message) {
    errorLine.textContent = message;
    app.dataset.state = "error";
  }

  function header(note) {
    return el("header", { class: "topbar" },
      el("span", { class: "brand" }, el("span", { class: "logo", text: "qkv" }),
        el("span", { class: "title", text: "attention explorer" })),
      el("span", { class: "mode-note", text: note }));
  }

  // A notebook's display (data.inline): the result alone, no header, and the page's height
  // posted to the notebook (which sizes the frame) whenever it changes.
  function inlinePage() {
    app.dataset.inline = "true";
    app.append(el("div", { class: "layout" }, outputBox, viewsBox));
    renderResult(data.result || {});
    const post = () => parent.postMessage({ qkvHeight: document.body.scrollHeight }, "*");
    post();  // now, and on each change (a frame out of view is laid out when it is seen)
    new ResizeObserver(post).observe(document.body);
  }

  function staticPage() {
    const result = data.result || {};
    document.title = `qkv attention explorer: ${result.model || "export"}`;
    app.append(header("exported page"),
      el("div", { class: "layout" },
        el("p", { class: "export-note" },
          "An exported page: the output and attention of model ",
          el("strong", { text: String(result.model || "?") }),
          ` (${modelLabel(result.model, result.kind)}) for one input. It needs no server and ` +
          "loads nothing from the network; run qkv serve to try other inputs."),
        outputBox, viewsBox));
    renderResult(result);
  }

  function servedPage() {
    const select = el("select", { id: "model-select", "aria-label": "model" },
      models.map((m) => el("option", { value: m.name, text: `${m.name} (${m.label})` })));
    const text = el("textarea", { id: "text-input", rows: 2, spellcheck: "false",
      "aria-label": "input text", placeholder: "type the input text" });
    const count = el("span", { id: "char-count", class: "muted" });
    const file = el("input", { id: "image-input", type: "file", accept: "image/png,image/jpeg",
      "aria-label": "input image (PNG or JPEG)" });
    const preview = el("img", { id: "image-preview", alt: "", hidden: true });
    const tokens = el("input", { id: "new-tokens", type: "number", min: 0,
      max: limits.max_new_tokens ?? 100, value: Math.min(40, limits.max_new_tokens ?? 40),
      "aria-label": "new tokens" });
    const run = el("button", { id: "run-button", type: "button", class: "primary", text: "Run" });
    const extras = { neuron: "neuron view", rollout: "rollout / flow" };  // the API's flags
    const boxes = Object.keys(extras).map((name) => el("input", { type: "checkbox",
      id: `extra-${name}`, "data-extra": name }));
    const textField = el("div", { class: "field text-field" }, text,
      el("div", { class: "hint" }, count,
        el("span", { class: "muted", text: " · Ctrl+Enter runs" })));
    const imageField = el("div", { class: "field image-field" }, file, preview);
    const tokensField = el("label", { class: "field tokens-field" }, "new tokens ", tokens);
    app.append(header(`${models.length} model${models.length === 1 ? "" : "s"} loaded`),
      el("div", { class: "layout" },
        el("section", { class: "panel controls", "aria-label": "input" },
          el("div", { class: "control-row" }, el("label", { class: "field" }, "model ", select),
            tokensField, boxes.map((box) => el("label", { class: "field" }, box,
              extras[box.dataset.extra])), run),
          textField, imageField, errorLine),
        outputBox, viewsBox));
    viewsBox.append(el("p", { class: "hint-panel panel",
      text: "Pick a model, give it an input and press Run to see its output and attention." }));

    let picked = null; // a promise of the chosen image file as {name, url}, or null
    const current = () => models.find((m) => m.name === select.value) || models[0];
    function counted() {
      count.textContent = `${text.value.length} / ${limits.max_chars ?? "?"} characters`;
    }
    function modelChanged() {
      const model = current();
      const image = model && model.input === "image";
      textField.hidden = image;
      imageField.hidden = !image;
      tokensField.hidden = !(model && model.kind === "language_model");
      for (const box of boxes) {
        box.disabled = !(model && (model.extras || []).includes(box.dataset.extra));
        box.parentNode.title = box.disabled ? `${model ? model.name : "this model"} has no ` +
          `${extras[box.dataset.extra]}` : "";
      }
      errorLine.textContent = "";
      run.disabled = !model;
    }
    select.addEventListener("change", modelChanged);
    text.addEventListener("input", counted);
    text.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
        event.preventDefault();
        go();
      }
    });
    file.addEventListener("change", () => {
      picked = null;
      preview.hidden = true;
      errorLine.textContent = "";
      const chosen = file.files && file.files[0];
      if (!chosen) return;
      if (limits.max_image_bytes && chosen.size > limits.max_image_bytes) {
        showError(`${chosen.name} has ${chosen.size.toLocaleString("en")} bytes; at most ` +
          `${limits.max_image_bytes.toLocaleString("en")} are accepted`);
        return;
      }
      picked = new Promise((resolve) => {
        const reader = new FileReader();
        reader.addEventListener("load", () => {
          const url = String(reader.result);
          if (url.startsWith("data:image/")) {
            preview.src = url;
            preview.hidden = false;
          }
          resolve({ name: chosen.name, url });
        });
        reader.addEventListener("error", () => {
          showError(`cannot read ${chosen.name}`);
          resolve(null);
        });
        reader.readAsDataURL(chosen);
      });
    });

    async function go() {
      const model = current();
      if (!model || run.disabled) return;
      const body = { model: model.name };
      for (const box of boxes) if (box.checked && !box.disabled) body[box.dataset.extra] = true;
      if (model.input === "image") {
        const upload = picked && (await picked);
        if (!upload) {
          showError("choose an image file (PNG or JPEG) first");
          return;
        }
        body.image = upload.url;
        body.image_name = upload.name;
      } else {
        body.text = text.value;
        if (model.kind === "language_model" && tokens.value !== "") {
          const wanted = Number(tokens.value);
          if (!Number.isInteger(wanted)) {
            showError("new tokens must be a whole number");
            return;
          }
          body.max_new_tokens = wanted;
        }
      }
      errorLine.textContent = "";
      app.dataset.state = "running";
      run.disabled = true;
      run.textContent = "Running…";
      try {
        let response;
        try {
          response = await fetch(data.api || "api/run", { method: "POST",
            headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
        } catch (_) {
          showError("the server did not answer");
          return;
        }
        let answer = null;
        try {
          answer = await response.json();
        } catch (_) {
          answer = null;
        }
        if (!response.ok) {
          const message = answer && typeof answer.error === "string" ? answer.error
            : `the server did not answer (HTTP ${response.status})`;
          showError(message);
          return;
        }
        if (!answer || typeof answer !== "object" || !answer.output) {
          showError("the server's answer is not a result");
          return;
        }
        renderResult(answer);
      } finally {
        run.disabled = false;
        run.textContent = "Run";
      }
    }
    run.addEventListener("click", go);
    counted();
    modelChanged();
    app.dataset.state = "ready";
  }

  app.dataset.mode = data.mode;
  try {
    if (data.mode === "compare") {
      qkvCompare.page(app, data, { el, header, heatImage, pixelImage, drawScaled, maxOf,
        colourTable, shown, fixed, cellSize, legend, overlayGrid, range,
        heat: (share) => colourAt(HEAT, share) });
    } else if (data.mode === "static" && data.inline) inlinePage();
    else if (data.mode === "static") staticPage();
    else servedPage();
  } catch (error) {
    app.append(el("p", { id: "error", role: "alert", text: `the page failed: ${error.message}` }));
    app.dataset.state = "error";
    throw error;
  }
})();
