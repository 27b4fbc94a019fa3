"""Labelled and tagged sentences: sentiment-labelled texts, part-of-speech and named-entity tagged
sentences, tag schemes (BIO, IOB1, IOBES) and word shapes."""
