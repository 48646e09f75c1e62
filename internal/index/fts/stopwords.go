package fts

// englishStopWords is LanceDB 0.39's built-in English stop word list
// (Lucene's, as tantivy and lance-tokenizer carry it). LanceDB removes
// stop words after stemming, so a token is compared in its stemmed form.
var englishStopWords = []string{
	"a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it",
	"no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these",
	"they", "this", "to", "was", "will", "with",
}
