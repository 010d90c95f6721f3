"""An embedding lookup: int64 indices (32 x 16) into a 1000 x 64 table."""
import torch
import torch.nn as nn

num_embeddings = 1000
embedding_dim = 64


class Model(nn.Module):
    def __init__(self, num_embeddings, embedding_dim):
        super().__init__()
        self.embedding = nn.Embedding(num_embeddings, embedding_dim)

    def forward(self, idx):
        return self.embedding(idx)


def get_inputs():
    return [torch.randint(0, num_embeddings, (32, 16))]


def get_init_inputs():
    return [num_embeddings, embedding_dim]


KBV_METADATA = {"input_domains": {"idx": "index:0:1000"}}
