# conda-forge: register the EP plugins installed in this environment; never raises (see _conda_ep_autoregister.py)
from onnxruntime._conda_ep_autoregister import register_installed_plugins as _register_installed_plugins
_register_installed_plugins()
