"""The parts of scripts/deepspeed_config_keys.py: targets (where to look and the
hand-kept lists), values (the abstract values and their helpers), interp (the
interpreter over DeepSpeed's ast).
"""
