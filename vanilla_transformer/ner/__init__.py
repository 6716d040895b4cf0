"""Named-entity recognition around the tagging model: entity mentions and document consistency (`mentions`),
mention replacement (`augmentation`), ensembles (`ensemble`), seen/unseen reports and document splits (`analysis`)."""
