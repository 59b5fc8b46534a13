package catalog

// FileValues are a config model's source and options as the config file
// gives them, before settings changed at run time lay over them: only
// these have their placeholders resolved.
type FileValues struct {
	Source  string
	Options map[string]string
}

// EngineValues are a model's source and options as its engine gets them:
// placeholders and secret references resolved. given are the values they
// were resolved from, so a changed copy of the model is resolved again.
type EngineValues struct {
	GivenSource  string
	GivenOptions map[string]string
	Source       string
	Options      map[string]string
}

// EngineSource is the source the engine gets.
func (m *Model) EngineSource() string {
	if m.EngineVals != nil {
		return m.EngineVals.Source
	}
	return m.Source
}

// EngineOptions are the options the engine gets.
func (m *Model) EngineOptions() map[string]string {
	if m.EngineVals != nil {
		return m.EngineVals.Options
	}
	return m.Options
}
