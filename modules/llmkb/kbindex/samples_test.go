package kbindex

// cl100k_base counts of the samples, measured once with the reference
// tokenizer (js-tiktoken 1.0.21, cl100k_base).
var tokenSamples = []struct {
	name   string
	text   string
	tokens int
}{
	{"de1", `Mitarbeiterinnen und Mitarbeiter, die dienstlich reisen, buchen Flüge über das freigegebene Reiseportal spätestens vierzehn Tage vor Abflug. Für Flüge unter sechs Stunden gilt die Economy-Klasse; die Business-Klasse kann von der Bereichsleitung genehmigt werden, wenn die Reise über Nacht stattfindet und am nächsten Morgen gearbeitet wird.`, 93},
	{"de2", `Übernachtungskosten werden bis zur Höchstgrenze des jeweiligen Reiseziels erstattet. Die Reisekostenabrechnung ist innerhalb von vier Wochen nach Rückkehr einzureichen; verspätet eingereichte Belege können nicht mehr berücksichtigt werden. Verpflegungsmehraufwendungen richten sich nach den steuerlichen Pauschalen des Bundesministeriums der Finanzen.`, 100},
	{"de3", `Die Datenschutz-Grundverordnung verpflichtet Unternehmen, personenbezogene Daten nur für festgelegte, eindeutige und legitime Zwecke zu verarbeiten. Betroffene Personen haben das Recht auf Auskunft, Berichtigung und Löschung ihrer Daten. Verstöße können mit Geldbußen von bis zu 20 Millionen Euro oder vier Prozent des weltweiten Jahresumsatzes geahndet werden.`, 99},
	{"de4", `Der Bundestag hat am Donnerstag mit großer Mehrheit ein Gesetz beschlossen, das den Ausbau erneuerbarer Energien beschleunigen soll. Genehmigungsverfahren für Windkraftanlagen sollen künftig höchstens sechs Monate dauern. Kritiker bemängeln, dass der Naturschutz dabei zu kurz komme, während Branchenverbände die Vereinfachung ausdrücklich begrüßen.`, 102},
	{"de5", `Um Ihr Passwort zurückzusetzen, öffnen Sie die Einstellungen, wählen Sie „Sicherheit“ und klicken Sie auf „Passwort vergessen“. Wir senden Ihnen einen sechsstelligen Code an die hinterlegte E-Mail-Adresse; der Code ist zehn Minuten gültig.`, 67},
	{"en1", `Employees travelling on company business must book flights through the approved travel portal at least fourteen days before departure. Economy class is the default for flights shorter than six hours; business class may be approved by a director for longer journeys or when an employee travels overnight and is expected to work the next morning.`, 58},
	{"en2", `Hotel costs are reimbursed up to the nightly limit for the destination city, which is published in the appendix and reviewed every January. Receipts must be itemised: a credit card statement alone is not sufficient. Minibar charges, in-room movies and laundry for stays shorter than five nights are personal expenses and will not be reimbursed.`, 68},
	{"en3", `The gateway routes each request to a replica of the requested model, preferring replicas that already hold the prompt's prefix in their KV cache. When no replica is ready, the request waits in a bounded queue (default: 30s) and fails with HTTP 503 and a Retry-After header if the queue is full. Operators can inspect queue depth via GET /admin/llm/queues, which returns JSON such as {"model": "llama-3.1-8b", "waiting": 12}.`, 105},
	{"en4", `In 2023, the company's revenue grew by 12.5% to $4,381 million, driven mainly by subscriptions in Europe and North America. Operating margin improved from 18% to 21%, although currency effects reduced reported growth by roughly 1.8 percentage points. The board proposes a dividend of $0.42 per share, payable on 15 May 2024.`, 81},
	{"en5", `Photosynthesis is the process by which green plants and certain other organisms transform light energy into chemical energy. During photosynthesis in green plants, light energy is captured and used to convert water, carbon dioxide, and minerals into oxygen and energy-rich organic compounds. It would be impossible to overestimate the importance of photosynthesis in the maintenance of life on Earth.`, 70},
	{"en6", `To reset your password, open Settings, choose Security and click "Forgot password". We will send a six-digit code to the e-mail address on file; the code expires after ten minutes. If you no longer have access to that mailbox, contact the service desk with your employee number and a photo ID.`, 61},
	{"mix1", `| Region | Nightly limit (EUR) | Per diem (EUR) |
| Berlin | 180 | 28 |
| München | 210 | 28 |
| London | 240 | 35 |
| New York | 320 | 52 |`, 54},
}
