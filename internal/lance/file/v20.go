package file

func (f *File) readField20(fl *Field, start, end uint64) (*Array, error) {
	return nil, errf("format 2.0 is not supported yet")
}
