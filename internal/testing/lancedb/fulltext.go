package lancedb

// PhraseSearch is a full-text phrase query (LanceDB's PhraseQuery, slop
// unmatched positions allowed between words) on column, which needs an
// fts index with positions; rows as TextSearch's.
func PhraseSearch(phrase, column string, slop int, columns []string) Step {
	s := TextSearch(phrase, column, 0, columns)
	s["phrase"] = true
	if slop > 0 {
		s["slop"] = slop
	}
	return s
}

// MatchSearch is a full-text MatchQuery on column, its terms combined by
// operator ("Or", "And"; "": LanceDB's Or); rows as TextSearch's.
func MatchSearch(query, column, operator string, columns []string) Step {
	s := TextSearch(query, column, 0, columns)
	s["match"] = true
	if operator != "" {
		s["operator"] = operator
	}
	return s
}
