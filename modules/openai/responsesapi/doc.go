// Package responsesapi translates OpenAI's Responses API (POST
// /v1/responses) to chat completions and back: a request is read and
// checked as OpenAI documents it and becomes an openai.Request in chat
// form whose Translation writes the chat answer (whole or streamed) back
// as a response object or Responses events. It keeps stored responses
// (store: true) for previous_response_id and serves GET and DELETE
// /v1/responses/{id} (ServeStoredResponse), in memory or in the store
// SetResponseStore sets.
//
// It registers itself with openai.RegisterAPI in init: a program that
// calls openai.Enter imports it. The name carries the suffix so that it
// shadows neither the common identifier responses nor the OpenAI SDK's
// package of that name.
package responsesapi
