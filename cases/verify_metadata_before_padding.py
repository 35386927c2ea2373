from cases.case import Case, run

CASE = Case(
    fault="verify_metadata_before_padding",
    story="SGLang #26244: EAGLE v2's eager verify initialised attention metadata on the "
          "pre-pad batch, while the forward consumed the padded input_ids/out_cache_loc; "
          "backends that bake write targets into metadata crashed on the shape mismatch. "
          "Our eager path pads in batch-invariant mode, which eager_vs_graph runs.",
    # On a CPU the reference kernel raises on the short metadata first; on a GPU the Triton
    # kernel reads past it silently and the metadata check names it.
    prop="eager_vs_graph", check=("metadata_shape", "crash"),
    example=run(2, steps=3, ndt=4, bs=5, graph=True),
)
