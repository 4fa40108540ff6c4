"""The families, one line each: a family's module exports FAMILY (posexport.models.family) and is imported here.
READERS, the catalogue's lines, the pending reasons and the hf runtime's sessions are assembled from this list."""

from __future__ import annotations

from .family import Family
from .pending import NO_POSITIONS, NOT_YET as OTHERS_NOT_YET

# One line per family:
from .alibi import FAMILY as alibi
from .audio_encoders import FAMILY as audio_encoders
from .bark import FAMILY as bark
from .beit import FAMILY as beit
from .chunked_audio import FAMILY as chunked_audio
from .clvp import FAMILY as clvp
from .composite import FAMILY as composite
from .decision_transformer import FAMILY as decision_transformer
from .decoders import FAMILY as decoders
from .deepseek import FAMILY as deepseek
from .dots3_audio import FAMILY as dots3_audio
from .esm import FAMILY as esm
from .falcon import FAMILY as falcon
from .gemma import FAMILY as gemma
from .gemma4 import FAMILY as gemma4
from .glm import FAMILY as glm
from .gptj import FAMILY as gptj
from .layout import FAMILY as layout
from .learned import FAMILY as learned
from .llama import FAMILY as llama
from .llama4 import FAMILY as llama4
from .moonshine import FAMILY as moonshine
from .mpnet import FAMILY as mpnet
from .musicgen import FAMILY as musicgen
from .navit import FAMILY as navit
from .neox import FAMILY as neox
from .patch_series import FAMILY as patch_series
from .patch_table import FAMILY as patch_table
from .phi3 import FAMILY as phi3
from .pix2struct import FAMILY as pix2struct
from .qwen_vl import FAMILY as qwen_vl
from .recurrent_gemma import FAMILY as recurrent_gemma
from .roformer import FAMILY as roformer
from .siglip2 import FAMILY as siglip2
from .sinusoids import FAMILY as sinusoids
from .swin import FAMILY as swin
from .swinv2 import FAMILY as swinv2
from .t5 import FAMILY as t5
from .time_series import FAMILY as time_series
from .timesfm import FAMILY as timesfm
from .videomae import FAMILY as videomae
from .videoprism import FAMILY as videoprism
from .vit import FAMILY as vit
from .vit_mae import FAMILY as vit_mae
from .whisper import FAMILY as whisper
from .wrapper import FAMILY as wrapper
from .zamba2 import FAMILY as zamba2

FAMILIES: tuple[Family, ...] = tuple(f for f in dict(globals()).values() if isinstance(f, Family))
# config.json's model_type -> the family that reads it, and the name of its module.
BY_TYPE: dict[str, Family] = {t: f for f in FAMILIES for t in f.types}
READERS: dict[str, str] = {t: f.name for t, f in BY_TYPE.items()}
# The pending reasons the families give for their kin: model_type -> why; with pending.py's for the types no family
# explains, every type not read yet. The types with no positional encoding (pending.py) are no family's.
PENDING: dict[str, str] = {t: why for f in FAMILIES for why, types in f.pending.items() for t in types}
NOT_YET: dict[str, str] = {**OTHERS_NOT_YET, **PENDING}
