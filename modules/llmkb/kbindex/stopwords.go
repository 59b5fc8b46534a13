package kbindex

// The stop words of English and German: dropped from chunks and queries,
// and counted to tell the two languages apart. Read-only after init.

var stopEN = set(`a about above after again against all am an and any are as at be because been
before being below between both but by can could did do does doing down during each few for from
further had has have having he her here hers herself him himself his how i if in into is it its
itself just me more most my myself no nor not now of off on once only or other our ours ourselves
out over own same she should so some such than that the their theirs them themselves then there
these they this those through to too under until up very was we were what when where which while
who whom why will with would you your yours yourself yourselves`)

var stopDE = set(`aber alle allem allen aller alles als also am an ander andere anderem anderen
anderer anderes auch auf aus bei bin bis bist da damit dann das dass dein deine deinem deinen
deiner dem den denn der des dich die dies diese diesem diesen dieser dieses dir doch dort du durch
ein eine einem einen einer eines er es etwas euch euer eure für gegen gewesen hab habe haben hat
hatte hatten hier hin hinter ich ihm ihn ihnen ihr ihre ihrem ihren ihrer ihres im in indem ins
ist jede jedem jeden jeder jedes jene jenem jenen jener jenes jetzt kann kein keine keinem keinen
keiner man manche mein meine meinem meinen meiner mich mir mit muss musste nach nicht nichts noch
nun nur ob oder ohne sehr sein seine seinem seinen seiner sich sie sind so solche soll sollte
sondern sonst um und uns unser unsere unter viel vom von vor war waren warst was weil weiter
welche welchem welchen welcher welches wenn werde werden wie wieder will wir wird wirst wo wollen
wollte würde würden zu zum zur zwar zwischen über`)

func set(list string) map[string]struct{} {
	m := map[string]struct{}{}
	for _, w := range words(list, nil) {
		m[w] = struct{}{}
	}
	return m
}
