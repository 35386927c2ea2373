"""The radix prefix cache (contract section 11): a tree of whole KV pages keyed by token
ids, shared by the target and draft pools."""
from specdec.prefix_cache.cache import PrefixCache  # noqa: F401
from specdec.prefix_cache.tree import RadixTree  # noqa: F401
