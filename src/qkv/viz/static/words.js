// qkv attention page: the "words" and "hide special tokens" toggles of a tokens view.
//
// The merging itself is done in Python (qkv/viz/view_json.py puts view.words, the view's
// attention merged by qkv.viz.words.merge_word_attention: a word receives the sum of its
// pieces' attention and gives their mean); here the page only chooses what to show:
//   - words on: view.words' labels, layers and marks instead of the pieces';
//   - specials hidden: the rows and columns of view(.words).special_queries / special_keys
//     dropped, the other rows NOT renormalised (what they gave the specials is missing), as
//     merge_word_attention(..., hide_special=True) does.
// Toggling re-renders the view's panel (layer and head start again).
//
// Hooks for tests: .view[data-words="true"|"false"][data-hide-special="true"|"false"],
// input.words-toggle, input.special-toggle (checkboxes), p.words-note (the rule, when on),
// and the panel element's qkvShown property: {queries, keys, layers, marks} as drawn.
const qkvWords = (function () {
  "use strict";

  // The view as shown: words or pieces, special rows and columns kept or dropped.
  function shownView(view, words, hideSpecial) {
    const base = words && view.words ? view.words : view;
    const dropQ = new Set(hideSpecial ? base.special_queries || [] : []);
    const dropK = new Set(hideSpecial ? base.special_keys || [] : []);
    const rows = base.queries.map((_, i) => i).filter((i) => !dropQ.has(i));
    const cols = base.keys.map((_, j) => j).filter((j) => !dropK.has(j));
    return Object.assign({}, view, {
      queries: rows.map((i) => base.queries[i]),
      keys: cols.map((j) => base.keys[j]),
      // a self-attention view's marks (one per token; a word's is its first piece's, made in
      // Python): the kept tokens' (rows and columns drop the same specials there)
      marks: Array.isArray(base.marks) ? rows.map((i) => base.marks[i]) : undefined,
      // L x H x Tq x Tk, the kept rows and columns only
      layers: base.layers.map((heads) => heads.map((m) =>
        rows.map((i) => cols.map((j) => m[i][j])))),
    });
  }

  function hasSpecial(view) {
    return Boolean((view.special_queries || []).length || (view.special_keys || []).length);
  }

  function checkbox(cls, label, checked, title) {
    const input = document.createElement("input");
    input.type = "checkbox";
    input.className = cls;
    input.checked = checked;
    const wrap = document.createElement("label");
    wrap.title = title;
    wrap.append(input, ` ${label}`);
    return [wrap, input];
  }

  // The panel of tokens view `view`, drawn by render(view), with the toggles where they apply.
  function panel(view, render) {
    const words = Boolean(view.words);
    if (!words && !hasSpecial(view)) return render(view);
    const state = { words: false, hide: false };
    function build() {
      const shown = shownView(view, state.words, state.hide);
      const root = render(shown);
      root.qkvShown = { queries: shown.queries, keys: shown.keys, layers: shown.layers,
        marks: shown.marks };
      root.dataset.words = String(state.words);
      root.dataset.hideSpecial = String(state.hide);
      const controls = root.querySelector(".view-controls");
      if (!controls) return root;
      if (words) {
        const [label, input] = checkbox("words-toggle", "words", state.words,
          "merge subword pieces into words");
        input.addEventListener("change", () => rebuild(root, { words: input.checked }));
        controls.append(label);
      }
      if (hasSpecial(view) || (words && hasSpecial(view.words))) {
        const [label, input] = checkbox("special-toggle", "hide special tokens", state.hide,
          "drop the rows and columns of special tokens ([CLS], </s>...); rows are not " +
          "renormalised");
        input.addEventListener("change", () => rebuild(root, { hide: input.checked }));
        controls.append(label);
      }
      if (state.words) {
        const note = document.createElement("p");
        note.className = "words-note muted";
        note.textContent = "words: a word receives the sum of its pieces' attention and " +
          "gives their mean";
        controls.after(note);
      }
      return root;
    }
    function rebuild(root, change) {
      Object.assign(state, change);
      root.replaceWith(build());
    }
    return build();
  }

  return { panel, shownView };
})();
