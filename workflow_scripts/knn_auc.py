"""Rule knn_auc: kNN AUC for every study target, Shannon and each Renyi alpha, grouped and study folds, with each
grouped row's permutation null (its labels permuted at the source level on its own folds); the paired
Renyi-minus-Shannon AUC on identical grouped folds; the blank store's family held out across size, on entropy
and on entropy / log V."""

from entropy_lens.analysis.features import FeatureSettings
from entropy_lens.analysis.separability.equivalence import renyi_equivalence
from entropy_lens.analysis.separability.heldout import family_heldout
from entropy_lens.analysis.separability.permutation import permutation_table
from entropy_lens.analysis.separability.settings import KnnSettings
from entropy_lens.analysis.separability.targets import RENYI_TARGETS, knn_table
from entropy_lens.core.draws import DrawSettings
from entropy_lens.core.tables import write_csv, write_table
from entropy_lens.plots.knn import plot_auc_bars
from entropy_lens.store import storage
from entropy_lens.verdicts.decision import NULL_MARGINS
from entropy_lens.verdicts.planted_nulls import draw_shown
from entropy_lens.workflow.jobs import setup_logging

setup_logging(snakemake)
knn, out = snakemake.params.knn, snakemake.output
settings = KnnSettings.from_config(knn)
features = FeatureSettings.from_config(knn)

stores = storage.open_all(dict(snakemake.input.items()), combined=True)
table = knn_table(stores, alphas=knn["alphas"], features=features, settings=settings)
write_table(table, out.csv, out.md, title="kNN AUC per target, model, entropy measure and fold protocol")
# With one model per family the pooled family target is model identity, the name the verdicts give it.
blank = stores.get("blank")
one_per_family = blank is not None and len(set(storage.as_str(blank["family"].values))) == blank.sizes["model"]
names = {"family": "model identity"} if one_per_family else None
plot_auc_bars(table, out.png, title="kNN AUC per target and entropy measure (grouped folds, 95% CI)", names=names)

# Each grouped row's planted null on its own design; the verdicts judge every draw through the row's own rule.
draws = permutation_table(
    stores,
    alphas=knn["alphas"],
    features=features,
    settings=settings,
    shown=draw_shown(NULL_MARGINS["AUC"]),
    draws=DrawSettings(seed=knn["fold_seed"]),
)
write_csv(draws, out.permutation)

equivalence = renyi_equivalence(stores, RENYI_TARGETS, alphas=knn["alphas"], features=features, settings=settings)
title = "Renyi minus Shannon kNN AUC on identical grouped folds (mean fold difference, corrected 95% CI)"
write_table(equivalence, out.equivalence_csv, out.equivalence_md, title=title)

heldout = family_heldout(stores, features=features, settings=settings)
title = "Blank profiles: each model held out, its samples classified by family from the other models (Wilson 95% CI)"
write_table(heldout, out.heldout_csv, out.heldout_md, title=title)

normalized = family_heldout(stores, features=features, settings=settings, normalize=True)
title = "Blank profiles as entropy / log V: each model held out, classified by family from the others (Wilson 95% CI)"
write_table(normalized, out.heldout_normalized_csv, out.heldout_normalized_md, title=title)
