// Package openai holds the OpenAI wire shapes the llm_* handlers share: the
// request parsed once per HTTP request (Request, Parse, Enter), the checks
// of chat, completions and embeddings bodies, OpenAI-shaped errors, usage,
// the SSE framing of streamed answers, and the JSON scanning and walking
// the translations build on. It is not a Caddy module.
//
// Clients of two other APIs are served by translating their requests to
// chat completions and the answers back, each in a package of its own
// that imports this one, never the reverse:
//
//   - modules/openai/responsesapi: OpenAI's Responses API (POST
//     /v1/responses) and its store of responses (previous_response_id,
//     GET and DELETE /v1/responses/{id}).
//   - modules/openai/messagesapi: Anthropic's Messages API (POST
//     /v1/messages and /v1/messages/count_tokens), and the other
//     direction for engines that speak it (chat to Messages and back).
//
// Each registers itself with RegisterAPI in init; Enter dispatches a
// request of their APIs to them. A handler that calls Enter imports both.
package openai
