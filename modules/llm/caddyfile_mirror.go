package llm
