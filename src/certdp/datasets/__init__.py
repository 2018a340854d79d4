"""Dataset generators and loaders, and :func:`build_space` that turns one into a problem."""

from .base import Dataset, build_space, travel_cost
from .embeddings import clustered_embeddings, clustered_vocabulary, embeddings, read_word2vec_bin, vocabulary
from .generators import area_grid, gaussian, grid, latlon, planar
from .road import RoadNetwork, load_road_network, road_network
from .spec import parse_dataset

__all__ = [
    "Dataset", "RoadNetwork", "area_grid", "build_space", "clustered_embeddings", "clustered_vocabulary", "embeddings",
    "gaussian", "grid", "latlon",
    "load_road_network", "parse_dataset", "planar", "read_word2vec_bin", "road_network",
    "travel_cost", "vocabulary",
]
