"""The summarisation benchmark's runs: each run's config, settings, budget and what the report
calls it (``benchmarks/summarisation.py`` trains them, ``summarisation_report.py`` writes them up).
"""

from __future__ import annotations

SUMMARY_CONFIG = "configs/summarise/docstrings-pointer-rnn.yaml"
DIALOGUE_CONFIG = "configs/dialogue/plays-rnn.yaml"
VARIANTS = {  # variant: (what the report calls it, its settings)
    "plain": ("attention, no copying", ("model.copy=false",)),
    "pointer": ("pointer-generator", ()),
    "coverage": ("pointer-generator + coverage", ("model.coverage=true",)),
}
# The one-attention pointer (See et al.): variant: (what the report calls it, its settings); its
# budget is in steps (main's options), the phases' weights come from the -shared run.
SHARED = "model.copy_attention=decoder"
SHARED_VARIANTS = {
    "shared": ("pointer-generator, one attention", (SHARED,)),
    "shared-coverage": ("  then coverage (final phase)", (SHARED, "model.coverage=true",
                                                          "train.coverage_weight=1.0")),
    "shared-more": ("  then the same steps, no coverage", (SHARED,)),
    # a longer final phase (--long-phase-steps): the coverage loss had not converged in 100
    "shared-coverage-long": ("  then coverage (longer final phase)",
                             (SHARED, "model.coverage=true", "train.coverage_weight=1.0")),
    "shared-more-long": ("  then the same longer phase, no coverage", (SHARED,)),
}  # fmt: skip
SHARED_STEPS = {"text": 1726, "code": 1575}  # the steps of the recorded own-attention pointers
PHASES = tuple(v for v in SHARED_VARIANTS if v != "shared")  # resumed from {kind}-shared
# Run: (config, settings, CPU-minute budget (None: a step budget), what it is).
GROUPS: dict[str, tuple[str, tuple[str, ...], int | None, str]] = {
    **{
        f"{kind}-{variant}": (SUMMARY_CONFIG, (f"data.options.kind={kind}", *sets), 30, what)
        for kind in ("text", "code")
        for variant, (what, sets) in VARIANTS.items()
    },
    **{
        f"{kind}-{variant}": (SUMMARY_CONFIG, (f"data.options.kind={kind}", *sets), None, what)
        for kind in ("text", "code")
        for variant, (what, sets) in SHARED_VARIANTS.items()
    },
    "dialogue-context": (DIALOGUE_CONFIG, (), 15, "reply given the previous turn"),
    "dialogue-alone": (DIALOGUE_CONFIG, ("data.options.replies_only=true",), 15,
                       "the replies alone (empty source)"),
}  # fmt: skip
