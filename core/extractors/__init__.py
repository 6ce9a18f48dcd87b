"""Extractors: one module per extractor, each a class on core.extractors.base.Extractor."""
