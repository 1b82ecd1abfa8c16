"""History that stays bounded (RET): pruning finished runs whose obligations are met, and what keeps the rest."""
