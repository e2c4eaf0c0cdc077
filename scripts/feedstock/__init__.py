"""Render the onnxruntime-ep-cuda feedstock from `config/feedstock.yaml`.

Stages, one module each: `inputs` (load and validate), `matrix` (the variant model conda-smithy
would derive), `rendering` (lay the model out as files), `files` (write atomically, or compare).
"""
