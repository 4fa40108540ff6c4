"""Why each model type of transformers' registry that posexport does not read is not read, for the types no family
explains (a family's module holds the reasons of its own kin, its PENDING): NOT_YET, one line per group naming what
its position code is ("in reach" marks a form posexport already models, waiting for its reader line; docs/models.md
counts them; the others name what posexport does not model), and NO_POSITIONS, the types that have no positional
encoding to read, with why."""

from __future__ import annotations


_GROUPS: dict[str, tuple[str, ...]] = {
    # --- rotary ---------------------------------------------------------------------------------------------
    "rotary on audio or time frames (apply_rotary_time_emb, streaming encoders, TTS flow heads) whose "
    "positions are frame times, not token indices; not read yet":
        ("musicflamingo", "gradium_phonon_tts", "pocket_tts", "timesfm2_5", "lasr_ctc", "lasr_encoder",
         "moonshine_streaming_encoder", "nemotron3_diarization", "nemotron3_5_transcribe_audio",
         "nemotron3_5_transcribe_word_timestamp", "nemo_speechlm"),
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
    # --- learned tables ---------------------------------------------------------------------------------------
    "SAM-style ViT image encoder: a pos_embed grid beside decomposed relative tables (rel_pos_h/w, use_rel_pos) "
    "added inside attention, which are not modelled (some feed a CLIP-like encoder read as its own type)":
        ("unlimited_ocr_vision", "deepseek_ocr2_vision", "pp_chart2table_vision", "pp_formulanet_vision",
         "slanext_vision"),
    "ViLT: text and patch positions in one config and one embeddings module (a BERT-like table beside a patch "
    "grid resampled per image and sampled to max_image_length patches in visual_embed), no sub-configs; not "
    "read yet": ("vilt",),
    "Granite-Speech's Conformer encoder: Shaw-style relative embeddings (rel_pos_emb over offsets clamped to "
    "max_pos_emb within context_size blocks) inside attention; not modelled":
        ("granite_speech_encoder", "granite_speech_plus_encoder"),
    "Phi-4-multimodal's audio Conformer: a learned relative attention bias (Phi4MultimodalAudioRelativeAttentionBias) "
    "added with the mask; not modelled": ("phi4_multimodal_audio",),
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
    "DeBERTa: disentangled relative attention (content-to-position and position-to-content terms); not "
    "modelled": ("deberta", "deberta-v2"),
    "XLNet: two-stream relative attention with sinusoidal relative encodings; not modelled": ("xlnet",),
    "Funnel: relative attention with pooled position encodings; not modelled": ("funnel",),
    "ProphetNet: its decoder's relative bias is not a table: T5's causal buckets gather a linear projection of each "
    "query's hidden state (relative_pos_embeddings, num_buckets × heads per token), over the main and n-gram predict "
    "streams; beside its learned tables, not modelled": ("prophetnet",),
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
