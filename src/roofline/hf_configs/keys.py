"""A config.json dict as a loader reads it: Keys records which keys were read, so the rest can be
reported, and refuses a value of the wrong kind or size; COST_NEUTRAL lists the keys that change no
count and pass without a word."""

from __future__ import annotations

import math

from roofline.errors import MAX_FLOAT, RooflineError, big_int

# keys that change no count the tool makes (numerics, positions' frequencies, ids, training knobs); the last two lines: a
# vision tower's and its projector's (MiniMax-M3-VL), left out of the count
COST_NEUTRAL = frozenset("""
architectures model_type transformers_version torch_dtype dtype _name_or_path auto_map bos_token_id eos_token_id
pad_token_id sep_token_id decoder_start_token_id initializer_range initializer_factor rms_norm_eps layer_norm_eps
layer_norm_epsilon norm_epsilon rope_theta rope_scaling rope_parameters rope_local_base_freq rope_type
max_position_embeddings use_cache attention_dropout hidden_dropout embd_pdrop resid_pdrop attn_pdrop summary_type
summary_use_proj summary_activation summary_proj_to_labels summary_first_dropout scale_attn_weights
reorder_and_upcast_attn scale_attn_by_inverse_layer_idx output_router_logits router_aux_loss_coef router_jitter_noise
pretraining_tp tokenizer_class task_specific_params is_encoder_decoder return_dict output_hidden_states
output_attentions id2label label2id problem_type finetuning_task torchscript tie_encoder_decoder
use_bfloat16 bad_words_ids prefix chunk_size_feed_forward use_return_dict classifier_dropout rotary_emb_base
rotary_pct partial_rotary_factor rotary_dim query_pre_attn_scalar
hidden_activation hidden_act activation_function cache_implementation pad_vocab_size_multiple norm_topk_prob
routed_scaling_factor scoring_func topk_method n_group topk_group aux_loss_alpha seq_aux ep_size rope_interleave
router_temperature swiglu_limit use_qk_norm_eps attn_temperature_tuning floor_scale attn_scale time_step_min
time_step_max time_step_floor time_step_limit time_step_rank rescale_prenorm_residual residual_in_fp32
use_mamba_kernels mamba_chunk_size chunk_size num_logits_to_keep boi_token_index eoi_token_index image_token_index
mm_tokens_per_image image_token_id boa_token_id audio_token_id video_token_id initializer_cutoff_factor
initial_context_length swiglu_alpha for_llm_compressor mlp_only_layers_ids original_max_position_embeddings
vision_start_token_id vision_end_token_id
boi_token_id eoi_token_id eoa_token_id eoa_token_index vision_soft_tokens_per_image
video_token_index image_seq_length image_grid_pinpoints img_token_compression_config process_image_mode
vision_feature_layer vision_feature_select_strategy projector_hidden_act projector_hidden_size multimodal_projector_bias
ignore_index media_placeholder_token_id use_unified_vision_chunk video_placeholder
begin_suppress_tokens diversity_penalty do_sample early_stopping encoder_no_repeat_ngram_size
exponential_decay_length_penalty forced_bos_token_id forced_eos_token_id is_decoder length_penalty max_length
min_length no_repeat_ngram_size num_beam_groups num_beams num_return_sequences output_scores remove_invalid_values
repetition_penalty return_dict_in_generate suppress_tokens temperature tf_legacy_loss top_k top_p typical_p
""".split())  # the last lines: PretrainedConfig's generation defaults, which older exports write out (no weights)

MAX_DIM = 10**8  # a width, count or vocabulary beyond this is a typo
MAX_LAYERS = 10_000  # published models have at most a few hundred
LAYER_COUNT_KEYS = frozenset(("num_hidden_layers", "n_layer", "num_layers"))  # refused past MAX_LAYERS when read


class Keys:
    """A config dict that records which keys a loader read, so the rest can be reported."""

    def __init__(self, raw: dict, name: str):
        self.raw, self.name, self.read = raw, name, set()
        self.defaults: dict = {}  # the config class's defaults for keys a published file may omit

    def get(self, key, default=None):
        self.read.add(key)
        value = self.raw.get(key)
        if value is None:
            value = self.defaults.get(key)
        return default if value is None else value

    def has(self, key) -> bool:
        self.read.add(key)
        return self.raw.get(key) is not None

    def need(self, key):
        value = self.get(key)
        if value is None:
            raise RooflineError(f"{self.name}: config.json lacks {key!r} (model_type {self.raw.get('model_type')!r})",
                                field="model")
        return value

    def int(self, key, default=None) -> int:
        v = self.need(key) if default is None else self.get(key, default)
        # bounds compared before any float(): an int past the largest float (10**400) overflows math.isfinite
        if (isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= MAX_DIM
                or (isinstance(v, float) and v != int(v))):
            got = big_int(v) if isinstance(v, int) and not isinstance(v, bool) and abs(v) > MAX_FLOAT else repr(v)
            raise RooflineError(f"{self.name}: config key {key} must be a whole number from 0 to {MAX_DIM:,}, got {got}",
                                field="model")
        if key in LAYER_COUNT_KEYS and v > MAX_LAYERS:  # before a loader builds a list that long
            raise RooflineError(f"{self.name}: config key {key} is {int(v):,}; at most {MAX_LAYERS:,} layers are read",
                                field="model")
        return int(v)

    def flag(self, key, default: bool) -> bool:
        """A true/false key: JSON true or false only ("yes" or 1 is refused, not guessed)."""
        v = self.get(key, default)
        if not isinstance(v, bool):
            raise RooflineError(f"{self.name}: config key {key} must be true or false, got {v!r}", field="model")
        return v

    def pos(self, key, default=None) -> int:
        """A size that must be at least 1 (hidden_size, heads, layers, vocab)."""
        v = self.int(key, default)
        if v < 1:
            raise RooflineError(f"{self.name}: config key {key} must be at least 1, got {v}", field="model")
        return v

    def not_finite(self) -> list[str]:
        """Cost-neutral keys holding NaN or infinity (Python's json reads them): ignored, but said."""
        return sorted(k for k, v in self.raw.items() if k in COST_NEUTRAL and isinstance(v, float)
                      and not math.isfinite(v))

    def not_understood(self) -> list[str]:
        return sorted(k for k in self.raw if k not in self.read and k not in COST_NEUTRAL and not k.startswith("_"))
