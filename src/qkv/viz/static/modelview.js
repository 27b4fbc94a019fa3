// qkv attention page: the model view of a tokens view (bertviz's): every layer and head as a
// small thumbnail in a grid, layers as rows and heads as columns; a click enlarges that layer
// and head in the view's matrix. Loaded before explorer.js in the same <script>; it defines
// one name, qkvModelView.
//
// Each thumbnail is a canvas of whole cells (Tk x Tq cells of `cell` px, no smoothing), so its
// pixels are the weights' colours: the darkest cell is the largest weight of that head.
const qkvModelView = (function () {
  "use strict";

  const THUMB = 64; // px: the longer side of a thumbnail, at most

  // layers: L x H x Tq x Tk weights; heat(matrix) -> a canvas of one pixel per weight;
  // pick(layer, head): what a click does. Returns {root, draw}: draw() paints every thumbnail
  // (called when the grid is first shown, and when the colour scale changes).
  function modelGrid(layers, queries, keys, heat, pick) {
    const heads = layers.length ? layers[0].length : 0;
    const cell = Math.max(1, Math.floor(THUMB / Math.max(queries.length, keys.length, 1)));
    const thumbs = [];
    const grid = document.createElement("div");
    grid.className = "model-grid";
    grid.setAttribute("role", "group");
    grid.setAttribute("aria-label", "every layer (rows) and head (columns)");
    grid.style.setProperty("--heads", String(heads));
    grid.append(document.createElement("span"));
    for (let h = 0; h < heads; h++) {
      const label = document.createElement("span");
      label.className = "model-col-label";
      label.textContent = `head ${h}`;
      grid.append(label);
    }
    layers.forEach((layer, l) => {
      const label = document.createElement("span");
      label.className = "model-row-label";
      label.textContent = `layer ${l}`;
      grid.append(label);
      layer.forEach((_, h) => {
        const canvas = document.createElement("canvas");
        canvas.className = "model-canvas";
        canvas.width = keys.length * cell;
        canvas.height = queries.length * cell;
        const button = document.createElement("button");
        button.type = "button";
        button.className = "model-thumb";
        button.dataset.layer = String(l);
        button.dataset.head = String(h);
        button.title = `layer ${l}, head ${h}: show it in the matrix`;
        button.append(canvas);
        button.addEventListener("click", () => pick(l, h));
        grid.append(button);
        thumbs.push({ l, h, canvas });
      });
    });
    let drawn = false;
    function draw(force) {
      if (drawn && !force) return;
      drawn = true;
      for (const { l, h, canvas } of thumbs) {
        const ctx = canvas.getContext("2d");
        ctx.imageSmoothingEnabled = false;
        ctx.drawImage(heat(layers[l][h]), 0, 0, canvas.width, canvas.height);
      }
      grid.dataset.drawn = "true";
    }
    return { root: grid, draw };
  }

  return { modelGrid };
})();
