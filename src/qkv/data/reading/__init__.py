"""Reading comprehension: cloze questions (Hill et al.'s Children's Book Test from the Bible and
the plays, and a synthetic task), SQuAD v1.1 files, and which words are entities or common
nouns."""
