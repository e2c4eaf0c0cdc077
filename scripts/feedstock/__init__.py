"""Render the onnxruntime-ep-cuda feedstock from `config/feedstock.yaml`.

The pipeline, one module per stage; `scripts/render.py` is the command line over it:
- load and validate: `reader` (YAML that refuses a key given twice; problems as `file: dotted.key:
  problem`) and `inputs` (pydantic models of the config and of the bot's fields in the recipe);
- model: `architectures` (where the CUDA architecture list of every CUDA version is decided, with
  `cuda_targets`: how ONNX Runtime reads a list's entry) and `ci_support` (the jobs conda-smithy wrote);
- render: `rendering` (the model laid out as files, through `templates/`) and `hand_edits` (the
  digests that keep a render from dropping a hand edit);
- write and check: `files` (all files or none, or a diff of what is stale).
"""
