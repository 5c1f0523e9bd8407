"""The suite's report: `results.md`, `results.json` and the figures, rewritten
each time from the rows' stored results.
"""
from typing import Any, Dict, List

from rembert_tf.ablation import comparisons
from rembert_tf.ablation import figures
from rembert_tf.ablation import results_table
from rembert_tf.common import fileio


def _output_embedding_pair(diagonals: Dict[str, List[float]]):
  """The (small E_out, large E_out) rows whose CKA curves both exist."""
  claim = next(c for c in comparisons.CLAIMS if c.key == "output_embedding")
  return next(((small, large) for large, small in claim.pairs
               if diagonals.get(small) and diagonals.get(large)), None)


def write_outputs(output_dir: str, row_results: List[Dict], model_dirs: Dict[str, str],
                  say) -> Dict[str, Any]:
  table = results_table.build_table(row_results)
  markdown = results_table.to_markdown(table)
  figures_dir = fileio.join(output_dir, "figures")
  fileio.makedirs(figures_dir)
  paths = dict(mlm_curves=fileio.join(figures_dir, "mlm_curves.png"),
               results=fileio.join(figures_dir, "results.png"))
  figures.plot_mlm_curves(model_dirs, paths["mlm_curves"])
  if table["tasks"]:
    figures.plot_results(table, paths["results"])
  diagonals = {r["name"]: r["similarity_diagonal"] for r in row_results
               if r.get("similarity_diagonal")}
  if diagonals:
    paths["layer_similarity"] = fileio.join(figures_dir, "layer_similarity.png")
    figures.plot_similarity_curves(diagonals, paths["layer_similarity"])
  pair = _output_embedding_pair(diagonals)
  if pair:
    # The paper's figure: a small and a large E_out, the rest equal.
    paths["output_embedding_similarity"] = fileio.join(
        figures_dir, "layer_similarity_output_embedding.png")
    figures.plot_similarity_curves(
        {name: diagonals[name] for name in pair},
        paths["output_embedding_similarity"],
        title="small vs large output embedding: pre-trained vs fine-tuned")
  fileio.write_text(fileio.join(output_dir, "results.md"), markdown)
  fileio.write_json(fileio.join(output_dir, "results.json"),
                    dict(table, figures=paths))
  say(markdown)
  say(f"[ablation] table: {fileio.join(output_dir, 'results.md')}; figures: "
      + ", ".join(paths.values()))
  return dict(table=table, markdown=markdown, figures=paths)
