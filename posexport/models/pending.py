"""Why each model type of transformers' registry that posexport does not read is not read: NOT_YET, one line
per group naming what its position code is ("in reach" marks a form posexport already models, waiting for its
reader line; docs/models.md counts them; the others name what posexport does not model), and NO_POSITIONS, the
types that have no positional encoding to read, with why."""

from __future__ import annotations

_GROUPS: dict[str, tuple[str, ...]] = {
    # --- rotary ---------------------------------------------------------------------------------------------
    "multi-head latent attention with a DSA indexer that rotates its own index heads half-split beside the "
    "de-interleaved latent rope: a second rope site not read yet":
        ("deepseek_v32", "glm_moe_dsa", "axk2", "mistral_large4", "mistral_large4_text"),
    "DeepSeek-V4: compressor and indexer ropes with their own theta (compress_rope_theta) and learned "
    "position_bias tables": ("deepseek_v4",),
    "its rotary class forms inv_freq its own way (not transformers' default rope init): checked to differ, "
    "not modelled": ("embedding_gemma2", "embedding_gemma2_text", "diffusion_gemma", "diffusion_gemma_text",
                     "gemma4_unified", "gemma4_unified_text", "gemma4_unified_assistant"),
    "NanoChat: its rotate_half flips the signs (x2, −x1), a rotation by −θ; not modelled": ("nanochat",),
    "rotary on audio or time frames (apply_rotary_time_emb, streaming encoders, TTS flow heads) whose "
    "positions are frame times, not token indices; not read yet":
        ("musicflamingo", "gradium_phonon_tts", "pocket_tts", "timesfm2_5", "lasr_ctc", "lasr_encoder",
         "moonshine_streaming_encoder", "nemotron3_diarization", "nemotron3_5_transcribe_audio",
         "nemotron3_5_transcribe_word_timestamp", "nemo_speechlm"),
    "HunYuan-VL: its sections split the doubled [θ | θ] vector (2·section each, XD-RoPE's rows), so a pair's two "
    "channels can turn with different rows; checked against posexport's mrope: differs":
        ("hunyuan_vl", "hunyuan_vl_text"),
    "ERNIE-4.5-VL: sections ordered height and width alternating per frequency, then time, on interleaved pairs "
    "(repeat_interleave(2)); checked against posexport's mrope (Qwen's layouts, half-split): differs":
        ("ernie4_5_vl_moe", "ernie4_5_vl_moe_text"),
    "M-RoPE text model whose rope_parameters and mrope_section are keyed by layer type (Qwen3-VL's interleaved "
    "sections per layer type); the Qwen-VL reader reads one M-RoPE block": ("cohere_compass", "cohere_compass_text"),
    "HY-V4-VL: Qwen3-VL's interleaved M-RoPE inside HY-V4's hybrid stack (multi-head latent attention beside "
    "linear-attention layers without rope); layer plan not read yet": ("hy_v4_vl", "hy_v4_vl_text"),
    "not M-RoPE (its rotary takes [batch, seq] positions): 1-D partial rope beside a lightning indexer "
    "(index_head_dim) that rotates its own index heads, a second rope site; not read yet":
        ("minimax_m3_vl", "minimax_m3_vl_text"),
    "Step-3.5/3.7: not M-RoPE (1-D rope per layer type), but its config class converts per-layer rope_theta and "
    "partial_rotary_factors lists of published configs, sliding layers take their own heads (per_layer_config), "
    "and a sparse indexer (sparse_attention_config) sits beside attention; not read yet": ("step3p7", "step3p5"),
    "Dots3-Note: not M-RoPE (1-D rope per layer type, partial), on multi-head latent attention with an indexer "
    "(index_head_dim, indexed_attention layers); not read yet": ("dots3_note", "dots3_note_text"),
    "GLM-5-Next: multi-head latent attention rotating qk_rope_head_dim channels inline in its attention (no "
    "rotary class to run); not read yet": ("glm5_next", "glm5_next_text"),
    "Qwen3-Omni whole model: its thinker and code predictor are read as their own types, but its talker_config "
    "(Qwen3OmniMoeTalkerConfig, no model_type of its own in the registry) and its code2wav transformer's "
    "rotary (Qwen3OmniMoeCode2Wav, sliding-window layers) are not read yet": ("qwen3_omni_moe",),
    "a vision tower with 2-D rope of its own layout (frequencies per axis, patch coordinates rescaled or "
    "windowed), sometimes with a learned grid table beside it; not modelled yet":
        ("lfm3_vl_vision", "mlcd",
         "mlcd_vision_model", "pixtral", "llama4_vision_model", "dinov3_vit", "eomt_dinov3", "sapiens2",
         "vjepa2", "gemma4_vision", "gemma4_unified_vision", "inkling2_vision", "kimi_k25_vision",
         "muse_glimmer_vision", "muse_spark_vision", "step3p5_vision",
         "hunyuan_vl_vision", "hy_v4_vl_vision", "minimax_m3_vl_vision", "molmo2_vision", "molmo2_adapter",
         "cosmos3_edge_vision", "apertus1p5_vision_tokenizer", "efficientloftr"),
    "LLaVA-OneVision-1.5's RICE tower: 2-D axial rope over the merged patch grid, with a trained class-token "
    "rotation (class_pos_emb, a learned angle per frequency) prepended to every frame's angles; the learned "
    "class angle is not modelled": ("llava_onevision1_5_vision",),
    "Ovis-2.5's tower: a learned grid resampled bicubic by gathered indices and weights in spatial-merge order "
    "(get_vision_interpolation_indices_and_weights) beside a 2-D axial rope; that gather is not one of "
    "vit-learned's forms": ("ovis2_5_vision",),
    "a convolutional vision tower (ALIGN's EfficientNet, Gemma-3n's MobileNet-V5 through timm): no position "
    "encoding of its own; its module's other towers hold the position code": ("align_vision_model", "gemma3n_vision"),
    "a timm model wrapped: its positions are timm's code (pos_embed of the wrapped architecture), not "
    "transformers'; not read": ("timm_wrapper",),
    "SAM-2/SAM-3/EdgeTAM: 2-D rope in memory attention, sine feature-map encodings and decomposed "
    "relative tables (rel_pos_h/w) in the image encoder; not modelled":
        ("sam", "sam_hq", "sam_vision_model", "sam_hq_vision_model", "sam_mask_decoder", "sam_hq_mask_decoder",
         "sam_prompt_encoder", "sam_hq_prompt_encoder", "sam2", "sam2_vision_model", "sam2_hiera_det_model",
         "sam2_mask_decoder", "sam2_prompt_encoder", "sam2_video", "sam2_video_mask_decoder",
         "sam2_video_prompt_encoder", "sam3", "sam3_vision_model", "sam3_vit_model", "sam3_detr_decoder",
         "sam3_detr_encoder", "sam3_geometry_encoder", "sam3_mask_decoder", "sam3_lite_text",
         "sam3_lite_text_detr_decoder", "sam3_lite_text_detr_encoder", "sam3_lite_text_geometry_encoder",
         "sam3_lite_text_mask_decoder", "sam3_lite_text_text_model", "sam3_tracker", "sam3_tracker_mask_decoder",
         "sam3_tracker_prompt_encoder", "sam3_tracker_video", "sam3_tracker_video_mask_decoder",
         "sam3_tracker_video_prompt_encoder", "sam3_video", "edgetam", "edgetam_vision_model",
         "edgetam_mask_decoder", "edgetam_prompt_encoder", "edgetam_video", "edgetam_video_mask_decoder",
         "edgetam_video_prompt_encoder", "seggpt", "vitdet", "unlimited_ocr_sam_vision_model",
         "deepseek_ocr2_sam_vision_model", "got_ocr2_vision"),
    "ESMFold2: an ESM-C language model (esmc_config, read as its own type esmc) beside an atom encoder whose "
    "rotary turns with each atom's x/y/z coordinates and space UID (EsmFold2RotaryEmbedding: spatial_rope_base_"
    "frequency per axis, uid_rope_base_frequency), not token positions, and an input embedder adding one-hot "
    "relative residue, token and chain offset bins to its pair representation (EsmFold2RelativePositionEncoding); "
    "not modelled": ("esmfold2",),
    "PE video composites: their video encoder embeds each frame with a timm image model (video_config.vision_config, "
    "timm_wrapper), whose positions are timm's code, not read": ("pe_audio_video", "pe_video"),
    # --- learned tables ---------------------------------------------------------------------------------------
    "ViTPose: the table's class row added to every patch (position_embeddings[:, 1:] + [:, :1]), no class "
    "token, never resampled; not vit-learned's form": ("vitpose_backbone",),
    "LW-DETR's ViT: a table with a class row the tower drops (it has no class token), the grid resampled "
    "(bicubic) to window-partitioned feature maps; vit-learned reads a table whole, its class row for a class "
    "token; the detector adds DETR query positions": ("lw_detr", "lw_detr_vit"),
    "RADIO: the learned grid resampled twice (bilinear to a max(h, w) square, cropped, bilinear again when "
    "not square) after class and register tokens; vit-learned resamples once": ("radio",),
    "SAM-style ViT image encoder: a pos_embed grid beside decomposed relative tables (rel_pos_h/w, use_rel_pos) "
    "added inside attention, which are not modelled (some feed a CLIP-like encoder read as its own type)":
        ("unlimited_ocr_vision", "deepseek_ocr2_vision", "pp_chart2table_vision", "pp_formulanet_vision",
         "slanext_vision"),
    "FLAVA's multimodal encoder as a folder of its own: a class token over the text and image towers' hidden "
    "states (which carry their positions), no position table of its own; not surveyed alone (the flava "
    "composite reads its towers)": ("flava_multimodal_model",),
    "GIT: its text table is configured at the model's own top level (max_position_embeddings, "
    "position_embedding_type beside vision_config), not in a sub-config of a read type; its vision tower "
    "(git_vision_model) is read as its own type": ("git",),
    "VideoPrism: its text tower (videoprism_text_model) is read, its vision tower (videoprism_vision_model: "
    "spatial and temporal tables) is not": ("videoprism",),
    "ViLT: text and patch positions in one config and one embeddings module (a BERT-like table beside a patch "
    "grid resampled per image and sampled to max_image_length patches in visual_embed), no sub-configs; not "
    "read yet": ("vilt",),
    "its vision encoder (vision_config: pp_formulanet_vision, slanext_vision; SAM-style, with decomposed "
    "relative tables) is not read (PP-FormulaNet's text decoder pp_formulanet_text is)": ("pp_formulanet", "slanext"),
    "T5Gemma-2: Gemma-3-style rope per layer type in its text encoder and decoder (t5gemma2_text, "
    "t5gemma2_decoder; the encoder beside a SigLIP tower that is read), which have no reader line yet":
        ("t5gemma2", "t5gemma2_encoder", "t5gemma2_decoder", "t5gemma2_text"),
    "Phi-4-multimodal: its vision tower (phi4_multimodal_vision) is read as its own type, its audio tower "
    "(phi4_multimodal_audio, a learned relative bias) is not": ("phi4_multimodal",),
    "PI0: its vision-language part (vlm_config) is a PaliGemma, read through its text_config only (wrapper.py: "
    "its SigLIP grid is not built), beside a Gemma action expert (dit_config); not read as a composite yet": ("pi0",),
    "Nemotron-H-Omni: its vision tower (vision_config, radio: the grid resampled twice) is not read (its "
    "text model, nemotron_h, has no position encoding)": ("nemotron_h_omni",),
    "Granite-Speech's Conformer encoder: Shaw-style relative embeddings (rel_pos_emb over offsets clamped to "
    "max_pos_emb within context_size blocks) inside attention; not modelled":
        ("granite_speech_encoder", "granite_speech_plus_encoder"),
    "Phi-4-multimodal's audio Conformer: a learned relative attention bias (Phi4MultimodalAudioRelativeAttentionBias) "
    "added with the mask; not modelled": ("phi4_multimodal_audio",),
    "LayoutLMv2 and LayoutXLM (LayoutLMv2Model): its x/y/h/w box tables are concatenated into channel slices "
    "(coordinate_size, shape_size), its visual tokens take the 1-D table at ids restarting from 0 and the box tables "
    "at a fixed visual_bbox grid, and every layer adds a 1-D relative bias over those position_ids and a 2-D one over "
    "each box's left and bottom edges (T5's bidirectional buckets, checked equal on ±200000, but at each sample's own "
    "positions: posexport's t5 bias graph takes one position vector for the whole batch); not read yet, and its model "
    "needs detectron2 to be built": ("layoutlmv2", "layoutxlm"),
    "LayoutLMv3: its x/y/h/w box tables are concatenated into channel slices (h and w clipped to 0 … 1023), its "
    "RoBERTa-like table counts from padding_idx + 1 while its biases count from 0, its image patches add a pos_embed "
    "grid, and its 1-D and 2-D relative biases (T5's buckets, checked equal on ±200000; the 2-D one at each sample's "
    "box left and bottom edges) are summed and divided by √head_dim, a scale posexport's t5 does not apply; not read yet":
        ("layoutlmv3",),
    "UDOP: a T5-style encoder whose relative biases (relative_bias_args) add, beside T5's 1-D buckets, horizontal and "
    "vertical ones over the offsets of box centres scaled by 100 and truncated, plus x/y cell tables at its float "
    "boxes · (max_2d_position_embeddings − 1) and image patches merged into the text; not modelled": ("udop",),
    "LiLT: a RoBERTa-like table on its text stream beside a layout stream whose input is a Linear "
    "(box_linear_embeddings) of its concatenated x/y/h/w rows plus box_position_embeddings, then LayerNorm, with "
    "attention of its own; the layout stream is not a table added to x: not modelled": ("lilt",),
    "BROS: sinusoids of every token pair's box-corner offsets (bbox · bbox_scale), projected by a Linear "
    "(bbox_projection) and dotted with each query in every layer, beside a BERT table; not modelled": ("bros",),
    "LXMERT: its object stream's positions are box_fc (a Linear of each box's coordinates) then LayerNorm, averaged "
    "with the object features, beside BERT's table on its words; not a table: not modelled": ("lxmert",),
    "VisualBERT: BERT's table on its words and visual_position_embeddings' row 0 on every visual token, but with "
    "image_text_alignment a visual token's rows average the word table over its aligned word positions (as LUKE's "
    "entities); the averaged rows are not modelled": ("visual_bert",),
    "TVP: BERT's table on its text, and on each cell (i, j) of its video grid row_position_embeddings' row i plus "
    "col_position_embeddings' row j, a summed grid that interpolate_pos_encoding resamples (bicubic, by a scale "
    "factor) once the grid outgrows max_grid_row/col_position_embeddings; a grid summed from two tables and then "
    "resampled is not a form posexport builds: not modelled": ("tvp",),
    "LUKE: RoBERTa's table on its words beside an entity table (LukeEntityEmbeddings.position_embeddings) averaged "
    "over each entity's span positions (entity_position_ids, −1 for padding); the averaged rows are not modelled":
        ("luke",),
    "Reformer: axial position embeddings (a factored 2-D learned table); not modelled": ("reformer",),
    "Perceiver: learned or Fourier position encodings of the input array, per modality; not modelled":
        ("perceiver",),
    "RF-DETR: its DINOv2 backbone is read as its own type (rf_detr_dinov2); its decoder's query positions are DETR's "
    "sine embeddings of the reference boxes (encode_sinusoidal_position_embedding) through an MLP; not modelled":
        ("rf_detr",),
    "Pixio: several class tokens (n_cls_tokens) before a ViT grid; not modelled (vit-learned takes one or two)":
        ("pixio",),
    "a learned spatial table plus a temporal table (video), or space-time tables of their own layout; "
    "not modelled": ("timesformer", "vivit", "hiera", "pvt", "yolos", "sapiens2_head", "videoprism_vision_model"),
    # --- fixed sinusoids ------------------------------------------------------------------------------------
    "SeamlessM4T-v2: a fairseq sinusoid in its text parts beside its Conformer speech encoder with relative_key "
    "positions; the composite folder not read yet": ("seamless_m4t_v2",),
    "2-D sine embeddings of feature maps (DETR's PositionEmbeddingSine, normalised coordinates) or keypoint "
    "encoders; not modelled":
        ("detr", "conditional_detr", "dab-detr", "deformable_detr", "table-transformer", "rt_detr", "rt_detr_v2",
         "rt_detr_resnet", "d_fine", "deimv2", "pp_doclayout_v2", "pp_doclayout_v3", "pp_doclayout_v4",
         "omdet-turbo", "maskformer", "mask2former", "oneformer", "grounding-dino", "mm-grounding-dino",
         "lightglue", "superglue", "slanet"),
    # --- relative biases and other forms ---------------------------------------------------------------------
    "LongT5: T5 buckets inside local or transient-global attention blocks; not modelled": ("longt5",),
    "DeBERTa: disentangled relative attention (content-to-position and position-to-content terms); not "
    "modelled": ("deberta", "deberta-v2"),
    "XLNet: two-stream relative attention with sinusoidal relative encodings; not modelled": ("xlnet",),
    "Funnel: relative attention with pooled position encodings; not modelled": ("funnel",),
    "ProphetNet: its decoder's relative bias is not a table: T5's causal buckets gather a linear projection of each "
    "query's hidden state (relative_pos_embeddings, num_buckets × heads per token), over the main and n-gram predict "
    "streams; beside its learned tables, not modelled": ("prophetnet",),
    "CPM-Ant: T5's bidirectional buckets only between tokens of one segment; a pair across segments (its prepended "
    "prompt tokens are segment 0, the text 2) takes a trained row per (query segment, key segment) instead "
    "(segment_types² rows after the buckets); not modelled": ("cpmant",),
    "relative attention logits or biases of their own form (gated, projected or per-head learned); not modelled":
        ("wavlm", "inkling_mm_model", "inkling_text", "inkling_vision", "inkling2", "inkling2_text", "inkling2_loop",
         "inkling2_loop_text"),
    "Conformer relative positional encoding (Transformer-XL style pos_bias_u/v with a sinusoid projection); "
    "not modelled":
        ("wav2vec2-conformer", "wav2vec2-bert", "seamless_m4t", "fastspeech2_conformer",
         "fastspeech2_conformer_with_hifigan", "parakeet_ctc", "parakeet_encoder", "parakeet_rnnt", "parakeet_tdt",
         "canary", "canary_decoder", "cohere_asr", "nemotron_asr_streaming", "nemotron_asr_streaming_encoder",
         "nemotron3_5_asr", "gemma3n_audio", "gemma4_audio", "granite_speech5_ctc", "granite_speech5_encoder",
         "speecht5", "vits"),
    "convolutional positional embedding (pos_conv_embed: a grouped convolution over the features); not a "
    "table, rotation or bias posexport models":
        ("wav2vec2", "hubert", "sew", "sew-d", "unispeech", "unispeech-sat", "data2vec-audio", "omniasr_audio",
         "omniasr_ctc", "higgs_audio_v2_tokenizer"),
    "LeViT: per-head attention biases indexed by patch offsets within its shrinking stages; not modelled":
        ("levit",),
    # --- towers and parts without a reader of their own ---------------------------------------------------------
    "a VQ image tokenizer or vocoder: convolutions and attention over latents, positions carried by the "
    "convolutions; not surveyed as a model of its own":
        ("chameleon_vqgan", "emu3_vqgan", "janus_vqgan", "glm_image_vqmodel", "flava_image_codebook",
         "fastspeech2_conformer_hifigan", "speecht5_hifigan",
         "vibevoice_diffusion"),
    "Moshi's depth decoder: no rope (use_rope=False), each codebook step has its own weights (flexible "
    "linear) instead of a position encoding": ("moshi_depth",),
    "DBRX: transformers 5.24 rotates with rope_parameters (default θ 10000) while attn_config.rope_theta (500000 "
    "in published configs) goes unused; posexport will not pick one of the two": ("dbrx",),
    "DiNAT: neighborhood attention (natten) with its own relative position bias; not modelled": ("dinat",),
    "Mllama's vision tower: gated learned position embeddings per tile and aspect-ratio (precomputed) "
    "embeddings; not modelled": ("mllama_vision_model",),
}
NOT_YET: dict[str, str] = {t: why for why, types in _GROUPS.items() for t in types}


_SSM = "state-space / recurrent layers: token order comes from the recurrence, no position encoding"
_HYBRID = "Mamba layers carry order; its attention layers use no position encoding"
_CONV = "convolutional: positions are implicit in the convolutions, no position encoding"
_CODEC = "convolutional audio codec or vocoder: no position encoding"
_WRAPPER = "a wrapper: its positions are those of the sub-models it composes (read each sub-model's type)"
_NOPE_LINEAR = "Kimi Linear: its linear-attention (KDA) layers carry order and its MLA layers use no rope (NoPE)"
_FRAMEWISE_AUDIO = ("an audio embedder with no attention and no convolution across frames: each frame is mapped "
                    "alone (Gemma-4-Unified: RMSNorm and a linear projection of a raw waveform frame of audio_embed_dim (640) samples; "
                    "Inkling: the sum of its quantised mel bins' codebook embeddings, RMSNorm); the frames' positions "
                    "are those the text model gives their tokens")
_CAUSAL_CONV_AUDIO = ("Muse-Spark's audio encoder: a causal convolutional pyramid (patch projections and depthwise "
                      "causal convolutions), no attention: positions are implicit in the convolutions, no position "
                      "encoding")
_PERCEIVER = ("a perceiver resampler (IDEFICS's, Idefics2's): learned latents cross-attending to the vision tower's "
              "features (which carry the tower's positions), no rotary and no position table (Idefics2's layers take "
              "position_ids=None and never use them)")
_QFORMER = ("BLIP-2's Q-Former (Blip2QFormerModel): learned query tokens (held by the model around it, not positions) "
            "through self-attention and cross-attention to image features; no token embeddings and no position code "
            "(BLIP-2's image-text retrieval model adds a BERT-like table to its text, Blip2TextEmbeddings, which the blip-2 "
            "composite does not build)")
_NO_POSITIONS_GROUPS = {
    _SSM: ("mamba", "mamba2", "falcon_mamba", "rwkv", "xlstm"),
    _HYBRID: ("jamba", "nemotron_h", "zamba"),
    _CONV: ("bit", "convnext", "convnextv2", "cvt", "dinov3_convnext", "efficientnet", "focalnet", "glpn", "hgnet_v2",
            "mobilenet_v1", "mobilenet_v2", "mobilevit", "mobilevitv2", "poolformer", "pvt_v2", "regnet", "resnet",
            "segformer", "swiftformer", "textnet", "pp_lcnet", "pp_lcnet_v3", "pp_lcnet_v4", "pp_ocrv5_mobile_det",
            "pp_ocrv5_mobile_rec", "pp_ocrv5_server_det", "pp_ocrv5_server_rec", "pp_ocrv6_medium_det",
            "pp_ocrv6_small_det", "pp_ocrv6_small_rec", "pp_ocrv6_tiny_rec", "superpoint", "uvdoc", "uvdoc_backbone",
            "florence_vision"),
    _CODEC: ("dac", "encodec", "xcodec", "univnet", "wavtokenizer", "wavtokenizer_encoder",
             "vibevoice_acoustic_tokenizer", "vibevoice_acoustic_tokenizer_decoder",
             "vibevoice_acoustic_tokenizer_encoder", "qwen2_5_omni_bigvgan"),
    _WRAPPER: ("speech-encoder-decoder", "rag", "timm_backbone",
               "upernet", "vitmatte", "vitpose", "depth_anything", "prompt_depth_anything", "zoedepth", "dpr", "colpali",
               "colqwen2", "colmodernvbert", "fuyu", "tipsv2_dpt", "depth_pro", "chmv2", "nougat"),
    _NOPE_LINEAR: ("kimi_linear",),
    _FRAMEWISE_AUDIO: ("gemma4_unified_audio", "inkling_audio"),
    _CAUSAL_CONV_AUDIO: ("muse_spark_audio",),
    _QFORMER: ("blip_2_qformer",),
    _PERCEIVER: ("idefics2_perceiver", "idefics_perciever"),
}
NO_POSITIONS: dict[str, str] = {t: why for why, types in _NO_POSITIONS_GROUPS.items() for t in types}
