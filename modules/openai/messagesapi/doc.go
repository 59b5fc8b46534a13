// Package messagesapi translates Anthropic's Messages API to and from
// chat completions, both ways round:
//
//   - a client's POST /v1/messages (and /v1/messages/count_tokens) is read
//     and checked as Anthropic documents it and becomes an openai.Request
//     in chat form whose Translation writes the chat answer (whole or
//     streamed) back as a message or Messages events, and errors in
//     Anthropic's shape;
//   - for an engine that speaks Messages, a chat request becomes a
//     Messages body (ChatToMessagesBody) and its answer, stream and errors
//     become chat's (MessagesToChatBody, MessagesToChatStream,
//     MessagesErrorToOpenAI).
//
// It registers itself with openai.RegisterAPI in init: a program that
// calls openai.Enter imports it. The name carries the suffix so that it
// does not shadow the common identifier messages.
package messagesapi
