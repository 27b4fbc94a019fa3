// The neuron view (Vig 2019; bertviz's neuron view) of a tokens view that carries its query
// and key vectors (view.neuron = {q: L x H x Tq x Dk, k: L x Hkv x Tk x Dk}, written by
// qkv/viz/view_json.py when asked: ViewOptions(neuron=True), `qkv explore --neuron`).
// For the chosen layer, head, query i and key j it draws q, k and q * k as bars per dimension
// (blue: positive, orange: negative, lengths scaled to the largest magnitude of the three) and
// gives score = sum(q * k), scaled = score / sqrt(Dk) and the view's own softmax weight.
// Query head h reads key head h / (H / Hkv), rounded down (grouped-query attention).
//
// Defines one global name, qkvNeuron: qkvNeuron.panel(view, shown) -> {node, show(layer, head,
// i, j)}; explorer.js appends node under the view and calls show for a clicked matrix cell.
// Hooks for tests: .neuron-view[data-layer][data-head][data-q][data-k]; .neuron-layer,
// .neuron-head, .neuron-query, .neuron-key (selects); .neuron-score, .neuron-scaled,
// .neuron-weight [data-value]; .neuron-bars[data-kind="q"|"k"|"qk"] of .neuron-bar[data-d]
// [data-value].
const qkvNeuron = (function () {
  "use strict";

  function make(tag, props, children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(props || {})) {
      if (key === "text") node.textContent = String(value);
      else node.setAttribute(key, String(value));
    }
    for (const child of children || []) node.append(child);
    return node;
  }

  function select(cls, label, options) {
    return make("select", { class: cls, "aria-label": label },
      options.map(([value, text]) => make("option", { value, text })));
  }

  function fmt(x) {
    return Number.isFinite(x) ? x.toFixed(4) : String(x);
  }

  function panel(view, shown) {
    const q = view.neuron.q;  // L x H x Tq x Dk
    const k = view.neuron.k;  // L x Hkv x Tk x Dk
    const layers = q.length;
    const heads = layers ? q[0].length : 0;
    const queries = view.queries || [];
    const keys = view.keys || [];
    const state = { layer: 0, head: 0, i: 0, j: 0 };
    const root = make("details", { class: "neuron-view", open: "" });
    root.append(make("summary", { text: "neuron view: how one query and one key make one " +
      "weight (click a matrix cell to choose the pair)" }));
    const layerSelect = select("neuron-layer", "neuron view layer",
      q.map((_, l) => [l, `layer ${l}`]));
    const headSelect = select("neuron-head", "neuron view head",
      Array.from({ length: heads }, (_, h) => [h, `head ${h}`]));
    const querySelect = select("neuron-query", "query token",
      queries.map((t, i) => [i, `${i} ${shown(t)}`]));
    const keySelect = select("neuron-key", "key token", keys.map((t, j) => [j, `${j} ${shown(t)}`]));
    root.append(make("div", { class: "view-controls" }, [
      make("label", {}, ["layer ", layerSelect]), make("label", {}, ["head ", headSelect]),
      make("label", {}, ["query ", querySelect]), make("label", {}, ["key ", keySelect])]));
    const numbers = make("p", { class: "neuron-numbers" });
    const bars = make("div", { class: "neuron-grid" });
    root.append(numbers, bars);

    function row(kind, name, values, max) {
      const cells = values.map((v, d) => {
        const bar = make("span", { class: "neuron-bar", "data-d": d, "data-value": v,
          title: `${name}[${d}] = ${fmt(v)}` });
        bar.style.setProperty("--h", (Math.abs(v) / max).toFixed(3));
        bar.dataset.sign = v < 0 ? "negative" : "positive";
        return bar;
      });
      return [make("span", { class: "neuron-name", text: name }),
        make("div", { class: "neuron-bars", "data-kind": kind }, cells)];
    }

    function number(cls, label, value) {
      return make("span", { class: cls, "data-value": value, text: `${label} ${fmt(value)}` });
    }

    function show(layer, head, i, j) {
      Object.assign(state, { layer, head, i, j });
      layerSelect.value = layer;
      headSelect.value = head;
      querySelect.value = i;
      keySelect.value = j;
      Object.assign(root.dataset, { layer, head, q: i, k: j });
      const kvHead = Math.floor(head / (heads / k[layer].length));
      const qv = q[layer][head][i];  // (Dk,)
      const kv = k[layer][kvHead][j];  // (Dk,)
      const product = qv.map((x, d) => x * kv[d]);
      const score = product.reduce((a, b) => a + b, 0);
      const scaled = score / Math.sqrt(qv.length);
      const weight = view.layers[layer][head][i][j];
      const max = Math.max(...qv.map(Math.abs), ...kv.map(Math.abs), ...product.map(Math.abs)) || 1;
      numbers.replaceChildren(
        `query ${i} “${shown(queries[i])}”, key ${j} “${shown(keys[j])}”, layer ${layer}, ` +
        `head ${head} (key head ${kvHead}): `,
        number("neuron-score", "score q·k", score), " · ",
        number("neuron-scaled", `scaled /√${qv.length}`, scaled), " · ",
        number("neuron-weight", "softmax weight", weight));
      bars.replaceChildren(...row("q", "q", qv, max), ...row("k", "k", kv, max),
        ...row("qk", "q × k", product, max));
    }

    const changed = () => show(Number(layerSelect.value), Number(headSelect.value),
      Number(querySelect.value), Number(keySelect.value));
    for (const s of [layerSelect, headSelect, querySelect, keySelect]) {
      s.addEventListener("change", changed);
    }
    if (layers && heads && queries.length && keys.length) show(0, 0, 0, 0);
    return { node: root, show };
  }

  return { panel };
})();
