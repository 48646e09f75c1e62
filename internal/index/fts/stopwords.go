package fts

// englishStopWords is LanceDB 0.39's built-in English stop word list: the
// NLTK list as the stop-words crate 0.10.0 carries it (198 words, with
// the apostrophe forms only a whitespace tokenizer keeps). LanceDB
// removes stop words after stemming, so a token is compared in its
// stemmed form ("having" stems to "have", which is listed).
var englishStopWords = []string{
	"a", "about", "above", "after", "again", "against", "ain", "all", "am", "an", "and", "any", "are",
	"aren", "aren't", "as", "at", "be", "because", "been", "before", "being", "below", "between",
	"both", "but", "by", "can", "couldn", "couldn't", "d", "did", "didn", "didn't", "do", "does",
	"doesn", "doesn't", "doing", "don", "don't", "down", "during", "each", "few", "for", "from",
	"further", "had", "hadn", "hadn't", "has", "hasn", "hasn't", "have", "haven", "haven't", "having",
	"he", "he'd", "he'll", "her", "here", "hers", "herself", "he's", "him", "himself", "his", "how",
	"i", "i'd", "if", "i'll", "i'm", "in", "into", "is", "isn", "isn't", "it", "it'd", "it'll",
	"it's", "its", "itself", "i've", "just", "ll", "m", "ma", "me", "mightn", "mightn't", "more",
	"most", "mustn", "mustn't", "my", "myself", "needn", "needn't", "no", "nor", "not", "now", "o",
	"of", "off", "on", "once", "only", "or", "other", "our", "ours", "ourselves", "out", "over",
	"own", "re", "s", "same", "shan", "shan't", "she", "she'd", "she'll", "she's", "should",
	"shouldn", "shouldn't", "should've", "so", "some", "such", "t", "than", "that", "that'll", "the",
	"their", "theirs", "them", "themselves", "then", "there", "these", "they", "they'd", "they'll",
	"they're", "they've", "this", "those", "through", "to", "too", "under", "until", "up", "ve",
	"very", "was", "wasn", "wasn't", "we", "we'd", "we'll", "we're", "were", "weren", "weren't",
	"we've", "what", "when", "where", "which", "while", "who", "whom", "why", "will", "with", "won",
	"won't", "wouldn", "wouldn't", "y", "you", "you'd", "you'll", "your", "you're", "yours",
	"yourself", "yourselves", "you've",
}

// spanishStopWords is LanceDB 0.39's built-in Spanish stop word list: the
// Snowball list tantivy and lance-tokenizer carry (308 words; not NLTK's,
// which adds "sentido" and others and lacks "sido" and "siendo").
var spanishStopWords = []string{
	"a", "al", "algo", "algunas", "algunos", "ante", "antes", "como", "con", "contra", "cual", "cuando", "de",
	"del", "desde", "donde", "durante", "e", "el", "ella", "ellas", "ellos", "en", "entre", "era", "erais",
	"eran", "eras", "eres", "es", "esa", "esas", "ese", "eso", "esos", "esta", "estaba", "estabais", "estaban",
	"estabas", "estad", "estada", "estadas", "estado", "estados", "estamos", "estando", "estar", "estaremos",
	"estará", "estarán", "estarás", "estaré", "estaréis", "estaría", "estaríais", "estaríamos", "estarían",
	"estarías", "estas", "este", "estemos", "esto", "estos", "estoy", "estuve", "estuviera", "estuvierais",
	"estuvieran", "estuvieras", "estuvieron", "estuviese", "estuvieseis", "estuviesen", "estuvieses",
	"estuvimos", "estuviste", "estuvisteis", "estuviéramos", "estuviésemos", "estuvo", "está", "estábamos",
	"estáis", "están", "estás", "esté", "estéis", "estén", "estés", "fue", "fuera", "fuerais", "fueran",
	"fueras", "fueron", "fuese", "fueseis", "fuesen", "fueses", "fui", "fuimos", "fuiste", "fuisteis",
	"fuéramos", "fuésemos", "ha", "habida", "habidas", "habido", "habidos", "habiendo", "habremos", "habrá",
	"habrán", "habrás", "habré", "habréis", "habría", "habríais", "habríamos", "habrían", "habrías", "habéis",
	"había", "habíais", "habíamos", "habían", "habías", "han", "has", "hasta", "hay", "haya", "hayamos",
	"hayan", "hayas", "hayáis", "he", "hemos", "hube", "hubiera", "hubierais", "hubieran", "hubieras",
	"hubieron", "hubiese", "hubieseis", "hubiesen", "hubieses", "hubimos", "hubiste", "hubisteis", "hubiéramos",
	"hubiésemos", "hubo", "la", "las", "le", "les", "lo", "los", "me", "mi", "mis", "mucho", "muchos", "muy",
	"más", "mí", "mía", "mías", "mío", "míos", "nada", "ni", "no", "nos", "nosotras", "nosotros", "nuestra",
	"nuestras", "nuestro", "nuestros", "o", "os", "otra", "otras", "otro", "otros", "para", "pero", "poco",
	"por", "porque", "que", "quien", "quienes", "qué", "se", "sea", "seamos", "sean", "seas", "seremos", "será",
	"serán", "serás", "seré", "seréis", "sería", "seríais", "seríamos", "serían", "serías", "seáis", "sido",
	"siendo", "sin", "sobre", "sois", "somos", "son", "soy", "su", "sus", "suya", "suyas", "suyo", "suyos",
	"sí", "también", "tanto", "te", "tendremos", "tendrá", "tendrán", "tendrás", "tendré", "tendréis",
	"tendría", "tendríais", "tendríamos", "tendrían", "tendrías", "tened", "tenemos", "tenga", "tengamos",
	"tengan", "tengas", "tengo", "tengáis", "tenida", "tenidas", "tenido", "tenidos", "teniendo", "tenéis",
	"tenía", "teníais", "teníamos", "tenían", "tenías", "ti", "tiene", "tienen", "tienes", "todo", "todos",
	"tu", "tus", "tuve", "tuviera", "tuvierais", "tuvieran", "tuvieras", "tuvieron", "tuviese", "tuvieseis",
	"tuviesen", "tuvieses", "tuvimos", "tuviste", "tuvisteis", "tuviéramos", "tuviésemos", "tuvo", "tuya",
	"tuyas", "tuyo", "tuyos", "tú", "un", "una", "uno", "unos", "vosotras", "vosotros", "vuestra", "vuestras",
	"vuestro", "vuestros", "y", "ya", "yo", "él", "éramos",
}

// frenchStopWords is LanceDB 0.39's built-in French stop word list: the
// Snowball list tantivy and lance-tokenizer carry (154 words; not NLTK's).
var frenchStopWords = []string{
	"au", "aux", "avec", "ce", "ces", "dans", "de", "des", "du", "elle", "en", "et", "eux", "il", "je", "la",
	"le", "leur", "lui", "ma", "mais", "me", "même", "mes", "moi", "mon", "ne", "nos", "notre", "nous", "on",
	"ou", "par", "pas", "pour", "qu", "que", "qui", "sa", "se", "ses", "sur", "ta", "te", "tes", "toi", "ton",
	"tu", "un", "une", "vos", "votre", "vous", "c", "d", "j", "l", "à", "m", "n", "s", "t", "y", "étée",
	"étées", "étant", "suis", "es", "êtes", "sont", "serai", "seras", "sera", "serons", "serez", "seront",
	"serais", "serait", "serions", "seriez", "seraient", "étais", "était", "étions", "étiez", "étaient", "fus",
	"fut", "fûmes", "fûtes", "furent", "sois", "soit", "soyons", "soyez", "soient", "fusse", "fusses",
	"fussions", "fussiez", "fussent", "ayant", "eu", "eue", "eues", "eus", "ai", "avons", "avez", "ont",
	"aurai", "aurons", "aurez", "auront", "aurais", "aurait", "aurions", "auriez", "auraient", "avais", "avait",
	"aviez", "avaient", "eut", "eûmes", "eûtes", "eurent", "aie", "aies", "ait", "ayons", "ayez", "aient",
	"eusse", "eusses", "eût", "eussions", "eussiez", "eussent", "ceci", "cela", "celà", "cet", "cette", "ici",
	"ils", "les", "leurs", "quel", "quels", "quelle", "quelles", "sans", "soi",
}

// germanStopWords is LanceDB 0.39's built-in German stop word list: the
// Snowball list tantivy and lance-tokenizer carry (231 words).
var germanStopWords = []string{
	"aber", "alle", "allem", "allen", "aller", "alles", "als", "also", "am", "an", "ander", "andere", "anderem",
	"anderen", "anderer", "anderes", "anderm", "andern", "anderr", "anders", "auch", "auf", "aus", "bei", "bin",
	"bis", "bist", "da", "damit", "dann", "der", "den", "des", "dem", "die", "das", "daß", "derselbe",
	"derselben", "denselben", "desselben", "demselben", "dieselbe", "dieselben", "dasselbe", "dazu", "dein",
	"deine", "deinem", "deinen", "deiner", "deines", "denn", "derer", "dessen", "dich", "dir", "du", "dies",
	"diese", "diesem", "diesen", "dieser", "dieses", "doch", "dort", "durch", "ein", "eine", "einem", "einen",
	"einer", "eines", "einig", "einige", "einigem", "einigen", "einiger", "einiges", "einmal", "er", "ihn",
	"ihm", "es", "etwas", "euer", "eure", "eurem", "euren", "eurer", "eures", "für", "gegen", "gewesen", "hab",
	"habe", "haben", "hat", "hatte", "hatten", "hier", "hin", "hinter", "ich", "mich", "mir", "ihr", "ihre",
	"ihrem", "ihren", "ihrer", "ihres", "euch", "im", "in", "indem", "ins", "ist", "jede", "jedem", "jeden",
	"jeder", "jedes", "jene", "jenem", "jenen", "jener", "jenes", "jetzt", "kann", "kein", "keine", "keinem",
	"keinen", "keiner", "keines", "können", "könnte", "machen", "man", "manche", "manchem", "manchen",
	"mancher", "manches", "mein", "meine", "meinem", "meinen", "meiner", "meines", "mit", "muss", "musste",
	"nach", "nicht", "nichts", "noch", "nun", "nur", "ob", "oder", "ohne", "sehr", "sein", "seine", "seinem",
	"seinen", "seiner", "seines", "selbst", "sich", "sie", "ihnen", "sind", "so", "solche", "solchem",
	"solchen", "solcher", "solches", "soll", "sollte", "sondern", "sonst", "über", "um", "und", "uns", "unse",
	"unsem", "unsen", "unser", "unses", "unter", "viel", "vom", "von", "vor", "während", "war", "waren",
	"warst", "was", "weg", "weil", "weiter", "welche", "welchem", "welchen", "welcher", "welches", "wenn",
	"werde", "werden", "wie", "wieder", "will", "wir", "wird", "wirst", "wo", "wollen", "wollte", "würde",
	"würden", "zu", "zum", "zur", "zwar", "zwischen",
}

// italianStopWords is LanceDB 0.39's built-in Italian stop word list (279 words,
// as TestStopWordsLanceDB found it).
var italianStopWords = []string{
	"a", "abbia", "abbiamo", "abbiano", "abbiate", "ad", "agl", "agli", "ai", "al", "all", "alla", "alle",
	"allo", "anche", "avemmo", "avendo", "avesse", "avessero", "avessi", "avessimo", "aveste", "avesti",
	"avete", "aveva", "avevamo", "avevano", "avevate", "avevi", "avevo", "avrai", "avranno", "avrebbe",
	"avrebbero", "avrei", "avremmo", "avremo", "avreste", "avresti", "avrete", "avrà", "avrò", "avuta", "avute",
	"avuti", "avuto", "c", "che", "chi", "ci", "coi", "col", "come", "con", "contro", "cui", "da", "dagl",
	"dagli", "dai", "dal", "dall", "dalla", "dalle", "dallo", "degl", "degli", "dei", "del", "dell", "della",
	"delle", "dello", "di", "dov", "dove", "e", "ebbe", "ebbero", "ebbi", "ed", "era", "erano", "eravamo",
	"eravate", "eri", "ero", "essendo", "faccia", "facciamo", "facciano", "facciate", "faccio", "facemmo",
	"facendo", "facesse", "facessero", "facessi", "facessimo", "faceste", "facesti", "faceva", "facevamo",
	"facevano", "facevate", "facevi", "facevo", "fai", "fanno", "farai", "faranno", "farebbe", "farebbero",
	"farei", "faremmo", "faremo", "fareste", "faresti", "farete", "farà", "farò", "fece", "fecero", "feci",
	"fosse", "fossero", "fossi", "fossimo", "foste", "fosti", "fu", "fui", "fummo", "furono", "gli", "ha",
	"hai", "hanno", "ho", "i", "il", "in", "io", "l", "la", "le", "lei", "li", "lo", "loro", "lui", "ma", "mi",
	"mia", "mie", "miei", "mio", "ne", "negl", "negli", "nei", "nel", "nell", "nella", "nelle", "nello", "noi",
	"non", "nostra", "nostre", "nostri", "nostro", "o", "per", "perché", "più", "quale", "quanta", "quante",
	"quanti", "quanto", "quella", "quelle", "quelli", "quello", "questa", "queste", "questi", "questo", "sarai",
	"saranno", "sarebbe", "sarebbero", "sarei", "saremmo", "saremo", "sareste", "saresti", "sarete", "sarà",
	"sarò", "se", "sei", "si", "sia", "siamo", "siano", "siate", "siete", "sono", "sta", "stai", "stando",
	"stanno", "starai", "staranno", "starebbe", "starebbero", "starei", "staremmo", "staremo", "stareste",
	"staresti", "starete", "starà", "starò", "stava", "stavamo", "stavano", "stavate", "stavi", "stavo",
	"stemmo", "stesse", "stessero", "stessi", "stessimo", "steste", "stesti", "stette", "stettero", "stetti",
	"stia", "stiamo", "stiano", "stiate", "sto", "su", "sua", "sue", "sugl", "sugli", "sui", "sul", "sull",
	"sulla", "sulle", "sullo", "suo", "suoi", "ti", "tra", "tu", "tua", "tue", "tuo", "tuoi", "tutti", "tutto",
	"un", "una", "uno", "vi", "voi", "vostra", "vostre", "vostri", "vostro", "è",
}

// portugueseStopWords is LanceDB 0.39's built-in Portuguese stop word list (203 words,
// as TestStopWordsLanceDB found it).
var portugueseStopWords = []string{
	"a", "ao", "aos", "aquela", "aquelas", "aquele", "aqueles", "aquilo", "as", "até", "com", "como", "da",
	"das", "de", "dela", "delas", "dele", "deles", "depois", "do", "dos", "e", "ela", "elas", "ele", "eles",
	"em", "entre", "era", "eram", "essa", "essas", "esse", "esses", "esta", "estamos", "estas", "estava",
	"estavam", "este", "esteja", "estejam", "estejamos", "estes", "esteve", "estive", "estivemos", "estiver",
	"estivera", "estiveram", "estiverem", "estivermos", "estivesse", "estivessem", "estivéramos",
	"estivéssemos", "estou", "está", "estávamos", "estão", "eu", "foi", "fomos", "for", "fora", "foram",
	"forem", "formos", "fosse", "fossem", "fui", "fôramos", "fôssemos", "haja", "hajam", "hajamos", "havemos",
	"hei", "houve", "houvemos", "houver", "houvera", "houveram", "houverei", "houverem", "houveremos",
	"houveria", "houveriam", "houvermos", "houverá", "houverão", "houveríamos", "houvesse", "houvessem",
	"houvéramos", "houvéssemos", "há", "hão", "isso", "isto", "já", "lhe", "lhes", "mais", "mas", "me", "mesmo",
	"meu", "meus", "minha", "minhas", "muito", "na", "nas", "nem", "no", "nos", "nossa", "nossas", "nosso",
	"nossos", "num", "numa", "não", "nós", "o", "os", "ou", "para", "pela", "pelas", "pelo", "pelos", "por",
	"qual", "quando", "que", "quem", "se", "seja", "sejam", "sejamos", "sem", "serei", "seremos", "seria",
	"seriam", "será", "serão", "seríamos", "seu", "seus", "somos", "sou", "sua", "suas", "são", "só", "também",
	"te", "tem", "temos", "tenha", "tenham", "tenhamos", "tenho", "terei", "teremos", "teria", "teriam", "terá",
	"terão", "teríamos", "teu", "teus", "teve", "tinha", "tinham", "tive", "tivemos", "tiver", "tivera",
	"tiveram", "tiverem", "tivermos", "tivesse", "tivessem", "tivéramos", "tivéssemos", "tu", "tua", "tuas",
	"tém", "tínhamos", "um", "uma", "você", "vocês", "vos", "à", "às", "éramos",
}

// swedishStopWords is LanceDB 0.39's built-in Swedish stop word list (114 words,
// as TestStopWordsLanceDB found it).
var swedishStopWords = []string{
	"alla", "allt", "att", "av", "blev", "bli", "blir", "blivit", "de", "dem", "den", "denna", "deras", "dess",
	"dessa", "det", "detta", "dig", "din", "dina", "ditt", "du", "där", "då", "efter", "ej", "eller", "en",
	"er", "era", "ert", "ett", "från", "för", "ha", "hade", "han", "hans", "har", "henne", "hennes", "hon",
	"honom", "hur", "här", "i", "icke", "ingen", "inom", "inte", "jag", "ju", "kan", "kunde", "man", "med",
	"mellan", "men", "mig", "min", "mina", "mitt", "mot", "mycket", "ni", "nu", "när", "någon", "något",
	"några", "och", "om", "oss", "på", "samma", "sedan", "sig", "sin", "sina", "sitt", "själv", "skulle", "som",
	"så", "sådan", "sådana", "sådant", "till", "under", "upp", "ut", "utan", "vad", "var", "vara", "varför",
	"varit", "varje", "vars", "vart", "vem", "vi", "vid", "vilka", "vilkas", "vilken", "vilket", "vår", "våra",
	"vårt", "än", "är", "åt", "över",
}

// norwegianStopWords is LanceDB 0.39's built-in Norwegian stop word list (172 words,
// as TestStopWordsLanceDB found it).
var norwegianStopWords = []string{
	"alle", "at", "av", "bare", "begge", "ble", "blei", "bli", "blir", "blitt", "både", "båe", "da", "de",
	"deg", "dei", "deim", "deira", "deires", "dem", "den", "denne", "der", "dere", "deres", "det", "dette",
	"di", "din", "disse", "ditt", "du", "dykk", "dykkar", "då", "eg", "ein", "eit", "eitt", "eller", "elles",
	"en", "enn", "er", "et", "ett", "etter", "for", "fordi", "fra", "før", "ha", "hadde", "han", "hans", "har",
	"hennar", "henne", "hennes", "her", "hjå", "ho", "hoe", "honom", "hoss", "hossen", "hun", "hva", "hvem",
	"hver", "hvilke", "hvilken", "hvis", "hvor", "hvordan", "hvorfor", "i", "ikke", "ikkje", "ingen", "ingi",
	"inkje", "inn", "inni", "ja", "jeg", "kan", "kom", "korleis", "korso", "kun", "kunne", "kva", "kvar",
	"kvarhelst", "kven", "kvi", "kvifor", "man", "mange", "me", "med", "medan", "meg", "meget", "mellom", "men",
	"mi", "min", "mine", "mitt", "mot", "mykje", "ned", "no", "noe", "noen", "noka", "noko", "nokon", "nokor",
	"nokre", "nå", "når", "og", "også", "om", "opp", "oss", "over", "på", "samme", "seg", "selv", "si", "sia",
	"sidan", "siden", "sin", "sine", "sitt", "sjøl", "skal", "skulle", "slik", "so", "som", "somme", "somt",
	"så", "sånn", "til", "um", "upp", "ut", "uten", "var", "vart", "varte", "ved", "vere", "verte", "vi", "vil",
	"ville", "vore", "vors", "vort", "vår", "være", "vært", "å",
}

// danishStopWords is LanceDB 0.39's built-in Danish stop word list (94 words,
// as TestStopWordsLanceDB found it).
var danishStopWords = []string{
	"ad", "af", "alle", "alt", "anden", "at", "blev", "blive", "bliver", "da", "de", "dem", "den", "denne",
	"der", "deres", "det", "dette", "dig", "din", "disse", "dog", "du", "efter", "eller", "en", "end", "er",
	"et", "for", "fra", "ham", "han", "hans", "har", "havde", "have", "hende", "hendes", "her", "hos", "hun",
	"hvad", "hvis", "hvor", "i", "ikke", "ind", "jeg", "jer", "jo", "kunne", "man", "mange", "med", "meget",
	"men", "mig", "min", "mine", "mit", "mod", "ned", "noget", "nogle", "nu", "når", "og", "også", "om", "op",
	"os", "over", "på", "selv", "sig", "sin", "sine", "sit", "skal", "skulle", "som", "sådan", "thi", "til",
	"ud", "under", "var", "vi", "vil", "ville", "vor", "være", "været",
}

// russianStopWords is LanceDB 0.39's built-in Russian stop word list (159 words,
// as TestStopWordsLanceDB found it).
var russianStopWords = []string{
	"а", "без", "более", "больше", "будет", "будто", "бы", "был", "была", "были", "было", "быть", "в", "вам",
	"вас", "вдруг", "ведь", "во", "вот", "впрочем", "все", "всегда", "всего", "всех", "всю", "вы", "где",
	"говорил", "да", "даже", "два", "для", "до", "другой", "его", "ее", "ей", "ему", "если", "есть", "еще", "ж",
	"же", "жизнь", "за", "зачем", "здесь", "и", "из", "или", "им", "иногда", "их", "к", "кажется", "как",
	"какая", "какой", "когда", "конечно", "кто", "куда", "ли", "лучше", "между", "меня", "мне", "много",
	"может", "можно", "мой", "моя", "мы", "на", "над", "надо", "наконец", "нас", "не", "него", "нее", "ней",
	"нельзя", "нет", "ни", "нибудь", "никогда", "ним", "них", "ничего", "но", "ну", "о", "об", "один", "он",
	"она", "они", "опять", "от", "перед", "по", "под", "после", "потом", "потому", "почти", "при", "про", "раз",
	"разве", "с", "сам", "свою", "себе", "себя", "сегодня", "сейчас", "сказал", "сказала", "сказать", "со",
	"совсем", "так", "такой", "там", "тебя", "тем", "теперь", "то", "тогда", "того", "тоже", "только", "том",
	"тот", "три", "тут", "ты", "у", "уж", "уже", "хорошо", "хоть", "чего", "человек", "чем", "через", "что",
	"чтоб", "чтобы", "чуть", "эти", "этого", "этой", "этом", "этот", "эту", "я",
}

// romanianStopWords is LanceDB 0.39's built-in Romanian stop word list (356 words,
// as TestStopWordsLanceDB found it).
var romanianStopWords = []string{
	"a", "abia", "acea", "aceasta", "această", "aceea", "aceeasi", "acei", "aceia", "acel", "acela", "acelasi",
	"acele", "acelea", "acest", "acesta", "aceste", "acestea", "acestei", "acestia", "acestui", "aceşti",
	"aceştia", "adica", "ai", "aia", "aibă", "aici", "al", "ala", "ale", "alea", "alt", "alta", "altceva",
	"altcineva", "alte", "altfel", "alti", "altii", "altul", "am", "anume", "apoi", "ar", "are", "as", "asa",
	"asta", "astea", "astfel", "asupra", "atare", "atat", "atata", "atatea", "atatia", "ati", "atit", "atita",
	"atitea", "atitia", "atunci", "au", "avea", "avem", "aveţi", "avut", "aş", "aţi", "ba", "ca", "cam", "cand",
	"care", "careia", "carora", "caruia", "cat", "catre", "ce", "cea", "ceea", "cei", "ceilalti", "cel", "cele",
	"celor", "ceva", "chiar", "ci", "cind", "cine", "cineva", "cit", "cita", "cite", "citeva", "citi", "citiva",
	"cu", "cui", "cum", "cumva", "cât", "câte", "câtva", "câţi", "cînd", "cît", "cîte", "cîtva", "cîţi", "că",
	"căci", "cărei", "căror", "cărui", "către", "da", "daca", "dacă", "dar", "dat", "dată", "dau", "de",
	"deasupra", "deci", "decit", "deja", "desi", "despre", "deşi", "din", "dintr", "dintr-", "dintre", "doar",
	"doi", "doilea", "două", "drept", "dupa", "după", "dă", "e", "ea", "ei", "el", "ele", "era", "eram", "este",
	"eu", "eşti", "face", "fara", "fata", "fel", "fi", "fie", "fiecare", "fii", "fim", "fiu", "fiţi", "foarte",
	"fost", "fără", "i", "ia", "iar", "ii", "il", "imi", "in", "inainte", "inapoi", "inca", "incit", "insa",
	"intr", "intre", "isi", "iti", "la", "le", "li", "lor", "lui", "lângă", "lîngă", "m", "ma", "mai", "mea",
	"mei", "mele", "mereu", "meu", "mi", "mie", "mine", "mod", "mult", "multa", "multe", "multi", "multă",
	"mulţi", "mâine", "mîine", "mă", "ne", "ni", "nici", "nimeni", "nimic", "niste", "nişte", "noastre",
	"noastră", "noi", "nostri", "nostru", "nou", "noua", "nouă", "noştri", "nu", "numai", "o", "or", "ori",
	"oricare", "orice", "oricine", "oricum", "oricând", "oricât", "oricînd", "oricît", "oriunde", "pai",
	"parca", "patra", "patru", "pe", "pentru", "peste", "pic", "pina", "poate", "pot", "prea", "prima",
	"primul", "prin", "printr-", "putini", "puţin", "puţina", "puţină", "până", "pînă", "sa", "sa-mi", "sa-ti",
	"sai", "sale", "sau", "se", "si", "sint", "sintem", "spate", "spre", "sub", "sunt", "suntem", "sunteţi",
	"sus", "să", "săi", "său", "t", "ta", "tale", "te", "ti", "tine", "toata", "toate", "toată", "tocmai",
	"tot", "toti", "totul", "totusi", "totuşi", "toţi", "trei", "treia", "treilea", "tu", "tuturor", "tăi",
	"tău", "u", "ul", "ului", "un", "una", "unde", "undeva", "unei", "uneia", "unele", "uneori", "unii", "unor",
	"unora", "unu", "unui", "unuia", "unul", "v", "va", "vi", "voastre", "voastră", "voi", "vom", "vor",
	"vostru", "vouă", "voştri", "vreo", "vreun", "vă", "zi", "zice", "îi", "îl", "îmi", "în", "îţi", "ăla",
	"ălea", "ăsta", "ăstea", "ăştia", "şi", "ţi", "ţie",
}

// finnishStopWords is LanceDB 0.39's built-in Finnish stop word list (229 words,
// as TestStopWordsLanceDB found it).
var finnishStopWords = []string{
	"ei", "eivät", "emme", "en", "et", "ette", "että", "he", "heidän", "heidät", "heihin", "heille", "heillä",
	"heiltä", "heissä", "heistä", "heitä", "hän", "häneen", "hänelle", "hänellä", "häneltä", "hänen", "hänessä",
	"hänestä", "hänet", "häntä", "itse", "ja", "johon", "joiden", "joihin", "joiksi", "joilla", "joille",
	"joilta", "joina", "joissa", "joista", "joita", "joka", "joksi", "jolla", "jolle", "jolta", "jona", "jonka",
	"jos", "jossa", "josta", "jota", "jotka", "kanssa", "keiden", "keihin", "keiksi", "keille", "keillä",
	"keiltä", "keinä", "keissä", "keistä", "keitä", "keneen", "keneksi", "kenelle", "kenellä", "keneltä",
	"kenen", "kenenä", "kenessä", "kenestä", "kenet", "ketkä", "ketä", "koska", "kuin", "kuka", "kun", "me",
	"meidän", "meidät", "meihin", "meille", "meillä", "meiltä", "meissä", "meistä", "meitä", "mihin", "miksi",
	"mikä", "mille", "millä", "miltä", "minkä", "minua", "minulla", "minulle", "minulta", "minun", "minussa",
	"minusta", "minut", "minuun", "minä", "missä", "mistä", "mitkä", "mitä", "mukaan", "mutta", "ne", "niiden",
	"niihin", "niiksi", "niille", "niillä", "niiltä", "niin", "niinä", "niissä", "niistä", "niitä", "noiden",
	"noihin", "noiksi", "noilla", "noille", "noilta", "noin", "noina", "noissa", "noista", "noita", "nuo",
	"nyt", "näiden", "näihin", "näiksi", "näille", "näillä", "näiltä", "näinä", "näissä", "näistä", "näitä",
	"nämä", "ole", "olemme", "olen", "olet", "olette", "oli", "olimme", "olin", "olisi", "olisimme", "olisin",
	"olisit", "olisitte", "olisivat", "olit", "olitte", "olivat", "olla", "olleet", "ollut", "on", "ovat",
	"poikki", "se", "sekä", "sen", "siihen", "siinä", "siitä", "siksi", "sille", "sillä", "siltä", "sinua",
	"sinulla", "sinulle", "sinulta", "sinun", "sinussa", "sinusta", "sinut", "sinuun", "sinä", "sitä", "tai",
	"te", "teidän", "teidät", "teihin", "teille", "teillä", "teiltä", "teissä", "teistä", "teitä", "tuo",
	"tuohon", "tuoksi", "tuolla", "tuolle", "tuolta", "tuon", "tuona", "tuossa", "tuosta", "tuota", "tähän",
	"täksi", "tälle", "tällä", "tältä", "tämä", "tämän", "tänä", "tässä", "tästä", "tätä", "vaan", "vai",
	"vaikka", "yli",
}

// hungarianStopWords is LanceDB 0.39's built-in Hungarian stop word list (198 words,
// as TestStopWordsLanceDB found it).
var hungarianStopWords = []string{
	"a", "abban", "ahhoz", "ahogy", "ahol", "aki", "akik", "akkor", "alatt", "amely", "amelyek", "amelyekben",
	"amelyeket", "amelyet", "amelynek", "ami", "amikor", "amit", "amolyan", "amíg", "annak", "arra", "arról",
	"az", "azok", "azon", "azonban", "azt", "aztán", "azután", "azzal", "azért", "be", "belül", "benne", "bár",
	"cikk", "cikkek", "cikkeket", "csak", "de", "e", "ebben", "eddig", "egy", "egyes", "egyetlen", "egyik",
	"egyre", "egyéb", "egész", "ehhez", "ekkor", "el", "ellen", "első", "elég", "elő", "először", "előtt",
	"emilyen", "ennek", "erre", "ez", "ezek", "ezen", "ezt", "ezzel", "ezért", "fel", "felé", "hanem", "hiszen",
	"hogy", "hogyan", "igen", "ill", "ill.", "illetve", "ilyen", "ilyenkor", "ismét", "ison", "itt", "jobban",
	"jó", "jól", "kell", "kellett", "keressünk", "keresztül", "ki", "kívül", "között", "közül", "legalább",
	"legyen", "lehet", "lehetett", "lenne", "lenni", "lesz", "lett", "maga", "magát", "majd", "meg", "mellett",
	"mely", "melyek", "mert", "mi", "mikor", "milyen", "minden", "mindenki", "mindent", "mindig", "mint",
	"mintha", "mit", "mivel", "miért", "most", "már", "más", "másik", "még", "míg", "nagy", "nagyobb", "nagyon",
	"ne", "nekem", "neki", "nem", "nincs", "néha", "néhány", "nélkül", "olyan", "ott", "pedig", "persze", "rá",
	"s", "saját", "sem", "semmi", "sok", "sokat", "sokkal", "szemben", "szerint", "szinte", "számára", "talán",
	"tehát", "teljes", "tovább", "továbbá", "több", "ugyanis", "utolsó", "után", "utána", "vagy", "vagyis",
	"vagyok", "valaki", "valami", "valamint", "való", "van", "vannak", "vele", "vissza", "viszont", "volna",
	"volt", "voltak", "voltam", "voltunk", "által", "általában", "át", "én", "éppen", "és", "így", "össze",
	"úgy", "új", "újabb", "újra", "ő", "ők", "őket",
}
