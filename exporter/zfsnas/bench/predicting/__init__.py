"""Predicting: the on-disk size of a corpus under each compression, recordsize and ashift, from a
sample of it, without writing a byte to any pool (`zfsnas-bench predict`).

- predict.py: the estimate: the walk, the sampled windows read in worker processes, each record
  stored as ZFS would store it, the ratio estimator and its interval;
- zfsalloc.py: OpenZFS's allocation model (compression step, block sizes, indirect blocks,
  dnodes, RAID-Z parity and padding, the deflate ratio `used` is charged with);
- lz4zfs.py: OpenZFS's own LZ4 (the r1xx compressor it bundles), built on first use.

Imports statistics/; nothing of running/, answering/ or client/ (predict_command.py, above, stores
and shows the predictions).
"""
