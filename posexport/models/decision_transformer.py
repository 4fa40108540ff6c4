"""Decision Transformer (`decision_transformer`): two learned tables, each posexport's learned form.
- `learned-timestep`: embed_timestep (max_ep_len rows) at each step's episode timestep (the `timesteps` input, not
  a token index), added to that step's return, state and action embeddings before they are interleaved;
- `learned-gpt2`: its GPT-2 encoder's wpe (n_positions rows), which DecisionTransformerModel calls with position_ids
  of zeros: row 0 added to every interleaved token (after embed_ln)."""

from __future__ import annotations

from .config import ModelConfig
from .family import Family
from .plan import Role
from .recipes import LearnedRecipe


def read(cfg: ModelConfig) -> list[Role]:
    roles = []
    for role, key, rows, notes in (
            ("learned-timestep", "embed_timestep.weight", cfg.count("max_ep_len", 4096),
             ("x is one of the return, state and action embeddings [batch, steps, hidden] (the same rows are added to "
              "each, before they are interleaved and normalised)",
              "position_ids are the episode timesteps the model is given (timesteps), not token indices")),
            ("learned-gpt2", "encoder.wpe.weight", cfg.count("n_positions", 1024),
             ("x is the interleaved (return, state, action) embeddings after embed_ln [batch, 3·steps, hidden]",
              "position_ids are all 0: DecisionTransformerModel passes zeros, so every token gets row 0"))):
        path, found = cfg.locate((key,))
        values = {"weights": str(path), "key": found, "max_positions": rows, "row_offset": 0}
        roles.append(Role(role, "learned", values, (), notes, LearnedRecipe(key=found)))
    return roles


FAMILY = Family(("decision_transformer",), read, "learned table (episode timesteps), learned table (its GPT-2's row 0)")
