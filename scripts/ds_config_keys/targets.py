"""What the analysis starts from and the hand-kept lists: entry points,
supplements, exclusions, type hints; each entry cites where DeepSpeed reads it.
"""

# ----------------------------------------------------------------------------
# Analysis configuration
# ----------------------------------------------------------------------------

# (module, function or class, {parameter: key path of the value passed in}).
# () is the root of the ds_config.
ENTRY_FUNCTIONS = [
    # deepspeed/__init__.py:initialize -- the user's config (dict or path).  It
    # builds DeepSpeedConfig(config) and DeepSpeedEngine(config=config, ...).
    ("deepspeed", "initialize", {"config": ()}),
    # deepspeed/runtime/config.py:DeepSpeedConfig -- also built directly by
    # zero.Init(config_dict_or_path=...) and HF integrations.
    ("deepspeed.runtime.config", "DeepSpeedConfig", {"config": ()}),
    # deepspeed/runtime/engine.py:DeepSpeedEngine.random_ltd_initialize calls
    # layer.init_config(random_ltd_config, ...) on model layers found at run time.
    ("deepspeed.runtime.data_pipeline.data_routing.basic_layer", "RandomLayerTokenDrop.init_config",
     {"config": ("data_efficiency", "data_routing", "random_ltd")}),
    # deepspeed/inference/quantization/quantization.py:_init_group_wise_weight_quantization
    # (reached through deepspeed.init_inference / quantization helpers) takes the
    # same training ds_config dict and reads weight_quantization.post_init_quant.
    ("deepspeed.inference.quantization.quantization", "_init_group_wise_weight_quantization", {"ds_config": ()}),
    # Public helper the user calls with the engine; reads
    # engine._config.data_efficiency_config[...][dynamic_batching][...].
    ("deepspeed.runtime.data_pipeline.data_sampling.variable_batch_size_and_lr",
     "get_dataloader_and_lr_scheduler_for_variable_batch_size_deepspeed",
     {"engine": "obj:deepspeed.runtime.engine:DeepSpeedEngine"}),
]

# Classes whose every method is analysed (self bound to an instance whose
# attributes were set by the analysed __init__).  Classes instantiated with
# config-derived arguments are added automatically.
ENTRY_CLASSES = [
    ("deepspeed.runtime.engine", "DeepSpeedEngine"),
    ("deepspeed.runtime.pipe.engine", "PipelineEngine"),
]

# Sections whose contents are free-form: the section itself is listed, nothing
# below it.
OPAQUE = {
    # deepspeed/runtime/config.py:get_optimizer_params -- keyword arguments of
    # the optimizer class named by optimizer.type (torch or DeepSpeed optimizer).
    "optimizer.params",
    # deepspeed/runtime/config.py:get_scheduler_params -- keyword arguments of
    # the lr scheduler class named by scheduler.type (runtime/lr_schedules.py).
    "scheduler.params",
    # deepspeed/compression/config.py:get_compression_config -- deeply nested,
    # with user-named groups (different_groups.<name>.params ...).
    "compression_training",
}

# Sections that accept arbitrary extra keys besides those listed (printed as
# comment lines after the header).
FREE_FORM_NOTES = {
    # deepspeed/runtime/config.py:get_amp_params -- all keys but "enabled" are
    # passed to apex amp.initialize(**amp_params).
    "amp": "all keys but enabled are passed to apex amp.initialize()",
    # deepspeed/runtime/config.py:get_pipeline_config -- user keys are merged
    # over the default dict.
    "pipeline": "user keys are merged into the pipeline dict as-is",
    # deepspeed/datastates/config.py:DeepSpeedDataStatesConfig -- deep-copied
    # and handed to the external datastates library.
    "datastates_ckpt": "whole section handed to the datastates library",
    # deepspeed/runtime/config.py:get_pld_params -- whole dict kept as pld_params.
    "progressive_layer_drop": "whole dict kept as pld_params",
    "optimizer.params": "optimizer keyword arguments (not listed)",
    "scheduler.params": "lr scheduler keyword arguments (not listed)",
    "compression_training": "nested user-named groups (not listed)",
}

# Keys the static analysis reaches but that are not user keys: DeepSpeed writes
# them itself before reading them.
EXCLUDE = {
    # deepspeed/runtime/engine.py:DeepSpeedEngine.__init__ sets
    # random_ltd_config[RANDOM_LTD_GLOBAL_BATCH_SIZE/MICRO_BATCH_SIZE] from the
    # batch config before RandomLTDScheduler(config) reads them.
    "data_efficiency.data_routing.random_ltd.global_batch_size",
    "data_efficiency.data_routing.random_ltd.micro_batch_size",
}

# Keys static analysis cannot reach, with where DeepSpeed reads them.
# (path, type, default-as-JSON-or-"-")
SUPPLEMENT = [
    # deepspeed/runtime/comm/coalesced_collectives.py:all_to_all_loco_quant_reduce
    # reads loco_param['err_beta'] / loco_param['reset_T'] (the dict is
    # zero_optimization.zeropp_loco_param, a Dict[str, Any] pydantic field;
    # documented defaults in runtime/zero/config.py docstring: 0.8 / 1024).
    ("zero_optimization.zeropp_loco_param.err_beta", "float", "-"),
    ("zero_optimization.zeropp_loco_param.reset_T", "int", "-"),
]

# Types for keys whose default is None (so the source gives no type by value).
# Each is justified by how DeepSpeed uses the value.
TYPE_HINTS = {
    # runtime/config.py:_set_batch_related_parameters does integer arithmetic.
    "train_batch_size": "int",
    "train_micro_batch_size_per_gpu": "int",
    "gradient_accumulation_steps": "int",
    # runtime/engine.py: global_steps % steps_per_print()
    "steps_per_print": "int",
    # runtime/config.py:get_communication_data_type: val.lower()
    "communication_data_type": "str",
    "seq_parallel_communication_data_type": "str",
    # runtime/config.py:_do_warning_check: vocabulary_size % 8
    "vocabulary_size": "int",
    # runtime/config.py:get_log_level / utils/logging.py: level name
    "log_level": "str",
    # runtime/constants.py "data_types" comment: ["bf16"|"fp16"|"fp32"]
    "data_types.grad_accum_dtype": "str",
    "data_types.param_dtype": "str",
    "data_types.buffer_dtype": "str",
    # runtime/config.py:get_optimizer_name / get_scheduler_name: .lower()
    "optimizer.type": "str",
    "scheduler.type": "str",
    # runtime/config.py:get_torch_autocast_dtype: DtypeEnum(value)
    "torch_autocast.dtype": "str",
    # runtime/config.py:get_lower_precision_safe_modules: list of str
    "torch_autocast.lower_precision_safe_modules": "list",
    # runtime/activation_checkpointing/checkpointing.py: num_layers
    "activation_checkpointing.number_checkpoints": "int",
    # profiling/flops_profiler: file name
    "flops_profiler.output_file": "str",
    # nebula/constants.py: paths
    "nebula.nebula_load_path": "str",
    "nebula.persistent_storage_path": "str",
    # __init__.py:initialize / config.py:__init__: world_size / sp size
    "sequence_parallel_size": "int",
    "data_parallel_size": "int",
    # autotuning/constants.py MODEL_INFO_FORMAT: numbers
    "autotuning.model_info.num_params": "int",
    "autotuning.model_info.hidden_size": "int",
    "autotuning.model_info.num_layers": "int",
    "autotuning.metric_path": "str",
    "autotuning.model_info_path": "str",
    "autotuning.max_train_batch_size": "int",
    "autotuning.arg_mappings": "dict",
    # model_checkpointing/constants.py: CHECKPOINT_DATA_PARALLEL_UNITS strings
    "checkpoint.writer.data_parallel": "str",
    # runtime/data_pipeline/constants.py: max_batch_size (int() applied)
    "data_efficiency.data_sampling.dynamic_batching.max_batch_size": "int",
    # data_pipeline/config.py:get_dynamic_batching: int(output[max_tokens])
    "data_efficiency.data_sampling.dynamic_batching.max_tokens": "int",
    # data_sampling/variable_batch_size_and_lr.py: os.path.join(metrics_path, ...)
    "data_efficiency.data_sampling.dynamic_batching.metrics_path": "str",
    # runtime/engine.py:DeepSpeedEngine.pld_theta/pld_gamma (floats used in
    # progressive_layer_drop.py; constants.py documents 1.0 / 0.001 but the
    # engine indexes the dict without a default).
    "progressive_layer_drop.theta": "float",
    "progressive_layer_drop.gamma": "float",
    # data_pipeline/data_routing/scheduler.py + basic_layer.py: ints, a list of
    # layer ids, and strings compared against fixed names.
    "data_efficiency.data_routing.random_ltd.total_layer_num": "int",
    "data_efficiency.data_routing.random_ltd.random_ltd_layer_num": "int",
    "data_efficiency.data_routing.random_ltd.random_ltd_layer_id": "list",
    "data_efficiency.data_routing.random_ltd.model_mask_name": "str",
    "data_efficiency.data_routing.random_ltd.model_type": "str",
    "data_efficiency.data_routing.random_ltd.hidden_state_order": "str",
    "data_efficiency.data_routing.random_ltd.layer_token_lr_schedule.enabled": "bool",
    "data_efficiency.data_routing.random_ltd.random_ltd_schedule.min_value": "int",
    "data_efficiency.data_routing.random_ltd.random_ltd_schedule.max_value": "int",
    "data_efficiency.data_routing.random_ltd.random_ltd_schedule.schedule_type": "str",
    "data_efficiency.data_routing.random_ltd.random_ltd_schedule.schedule_config.require_steps": "int",
    "data_efficiency.data_routing.random_ltd.random_ltd_schedule.schedule_config.seq_per_step": "int",
    "data_efficiency.data_routing.random_ltd.random_ltd_schedule.schedule_config.root_degree": "int",
}

# runtime/data_pipeline/curriculum_scheduler.py:CurriculumScheduler -- the same
# schema under the legacy top-level "curriculum_learning" and under each
# data_efficiency curriculum metric (data_sampling/data_sampler.py).
for _p in ("curriculum_learning.", "data_efficiency.data_sampling.curriculum_learning.curriculum_metrics.*."):
    TYPE_HINTS.update({
        _p + "min_difficulty": "int",
        _p + "max_difficulty": "int",
        _p + "schedule_type": "str",
        _p + "schedule_config.difficulty": "list",
        _p + "schedule_config.max_step": "list",
        _p + "schedule_config.total_curriculum_step": "int",
        _p + "schedule_config.difficulty_step": "int",
        _p + "schedule_config.root_degree": "int",
    })
TYPE_HINTS.update({
    # runtime/engine.py:_forward_prologue: == "seqlen"
    "curriculum_learning.curriculum_type": "str",
    # data_sampling/data_sampler.py: paths and fixed-name strings
    "data_efficiency.data_sampling.curriculum_learning.data_cluster_path": "str",
    "data_efficiency.data_sampling.curriculum_learning.curriculum_metrics.*.index_to_sample_path": "str",
    "data_efficiency.data_sampling.curriculum_learning.curriculum_metrics.*.index_to_metric_path": "str",
    "data_efficiency.data_sampling.curriculum_learning.curriculum_metrics.*.difficulty_type": "str",
    "data_efficiency.data_sampling.curriculum_learning.curriculum_metrics.*.clustering_type": "str",
    # module_inject/auto_ep_config.py:validate_autoep_config: names / patterns
    "expert_parallel.preset_model": "str",
    "expert_parallel.moe_layer_pattern": "str",
    "expert_parallel.expert_pattern": "str",
    "expert_parallel.router_pattern": "str",
    "expert_parallel.expert_w1": "str",
    "expert_parallel.expert_w2": "str",
    "expert_parallel.expert_w3": "str",
    "expert_parallel.num_experts_attr": "str",
    "expert_parallel.top_k_attr": "str",
    "expert_parallel.shared_experts_pattern": "str",
    "expert_parallel.shared_experts_gate_pattern": "str",
    "expert_parallel.has_shared_experts": "bool",
    "expert_parallel.num_expert_groups": "int",
    "expert_parallel.num_limited_groups": "int",
    # sparse_attention/sparsity_config.py: list of ints
    "sparse_attention.global_block_end_indices": "list",
    # compression_training / optimizer / scheduler sections
    "compression_training": "dict",
})
# inference/quantization/utils.py:Quantizer/DeQuantizer: num_bits in (4, 8),
# symmetric == False, tensor.shape[group_dim] % group_size.
for _p in ("weight_quantization.quantized_initialization.", "weight_quantization.post_init_quant.*."):
    TYPE_HINTS.update({_p + "num_bits": "int", _p + "group_size": "int", _p + "group_dim": "int",
                       _p + "symmetric": "bool"})

# Type/default corrections where the static reading is misleading:
# path -> (type or None to keep, default or None to keep).
FORCE = {
    # runtime/config.py:get_optimizer_legacy_fusion -- `if K in d: return d[K]
    # else: return LEGACY_FUSION_DEFAULT` (the default is in the else branch).
    "optimizer.legacy_fusion": ("bool", "false"),
    # runtime/config.py:get_sparse_attention_mode -- same pattern, SPARSE_MODE_DEFAULT.
    "sparse_attention.mode": ("str", '"fixed"'),
    # runtime/config.py:get_pipeline_config -- "stages": "auto" or an int.
    "pipeline.stages": ("any", None),
    # zero/config.py:read_zero_config_deprecated -- legacy `"zero_optimization":
    # true` form; get_scalar_param(param_dict, "allgather_size", 5e8) feeds
    # DeepSpeedZeroConfig.allgather_bucket_size (int; pydantic accepts 5e8).
    "allgather_size": ("int", "500000000"),
    # datastates/config.py: enabled = param_dict.get("datastates_ckpt", False)
    # is not False; the section itself is a dict handed to datastates.
    "datastates_ckpt": ("dict", "-"),
    # runtime/config.py:get_optimizer_params / get_scheduler_params,
    # compression/config.py:get_compression_config -- dict sections.
    "optimizer.params": ("dict", None),
    "scheduler.params": ("dict", None),
    "compression_training": ("dict", None),
}

HEADER = "# DeepSpeed {sha} (deepspeedai/DeepSpeed), scripts/deepspeed_config_keys.py"

EXTERNAL_CONSTS = {"sys.maxsize": 2**63 - 1}


# Every name, the underscored helpers too, for the modules that build on this one.
__all__ = [n for n in dir() if not n.startswith("__")]
